"""``offload-load``, the load generator's own command (docs/load.md), as pip installs it:
the same Rust code as ``cargo build -p offload-load`` builds, with Ctrl-C stopping the
run early and still printing its report."""

from __future__ import annotations

import sys


def main() -> None:
    from offloadlab import _core

    raise SystemExit(_core.load_cli(["offload-load", *sys.argv[1:]]))

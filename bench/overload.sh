#!/usr/bin/env bash
# The engine's goodput at 150% of its saturation load against its peak: the overload
# test (crates/offload-server/tests/overload.rs) with its goodput check on, an 8 s
# peak and 15 s of overload. Prints the ratio (excused for CPU the machine took from
# the engine, and plain) beside its target, 0.9, and fails below it.
set -euo pipefail
cd "$(dirname "$0")/.."
OFFLOAD_OVERLOAD_GOODPUT=1 cargo test -q -p offload-server --test overload -- --nocapture

"""A Dask scheduler given by ``--cluster``: the model and simulator sweeps
(:mod:`offloadlab.sweep`) and the load generator across hosts
(:mod:`offloadlab.testbed.cluster`) connect to it the same way."""

from __future__ import annotations

import re

from offloadlab.errors import InputError

ADDRESS = re.compile(r"(tcp|tls)://[^\s/]+:\d{1,5}")


def connect(address: str, timeout_s: float, workers: str,
            unreachable: type[Exception] = InputError):
    """A ``distributed.Client`` of the scheduler at ``address``. A malformed address is an
    :class:`InputError`; a scheduler that does not answer within ``timeout_s`` raises
    ``unreachable``, whose message ends by saying how to start one and ``workers`` (how
    to start the workers the caller needs)."""
    if not ADDRESS.fullmatch(address):
        raise InputError(f"--cluster '{address}': write the Dask scheduler's address as "
                         "tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786")
    import distributed  # only for --cluster: it takes a second to import

    try:
        return distributed.Client(address, timeout=timeout_s, set_as_default=False)
    except OSError as exc:  # includes TimeoutError
        raise unreachable(f"--cluster {address}: no Dask scheduler answered within "
                          f"{timeout_s:g} s ({exc}); start one with `dask scheduler` and "
                          f"{workers}") from None

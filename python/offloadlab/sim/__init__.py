"""The discrete-event simulator (Rust, ``crates/offload-sim``) on a scenario.

:func:`run` simulates the request-level network of seed 000 — the host alone next to
the host + offload engine, fed by the same requests — and returns a
:class:`SimResult` in the result schema the model uses, with 95% confidence
intervals, sojourn-time quantiles and the run's event count and speed. The method is
in ``docs/sim.md``.

:func:`offloadlab.sim.closed.simulate` simulates a closed network of
:mod:`offloadlab.model.mva` instead, to check mean value analysis. :mod:`offloadlab.sim.polling`
simulates a polling driver's receive path in Python, to check
:mod:`offloadlab.model.polling`.
"""

from offloadlab.sim.run import QUANTILES, SimResult, check_options, run

__all__ = ["QUANTILES", "SimResult", "check_options", "run"]

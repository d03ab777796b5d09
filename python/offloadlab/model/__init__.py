"""Closed-form queueing models of a host with and without an offload engine (seed 000).

:func:`evaluate` solves a scenario over a rate sweep; :func:`verdict` says in words
whether offloading helps. The equations are in :mod:`offloadlab.model.tandem` and
documented in ``docs/model.md``. :mod:`offloadlab.model.mva` solves closed multi-class
networks (the multi-tier model of seed 003) by mean value analysis;
:mod:`offloadlab.model.cache` gives an LRU cache's hit ratio by Che's approximation.
:mod:`offloadlab.model.polling` is seed 002's receive path of a polling device driver
(docs/driver.md).
"""

from offloadlab.model.result import evaluate
from offloadlab.model.verdict import alone, verdict

__all__ = ["alone", "evaluate", "verdict"]

"""Write congestion and its throttling (seed 002, Part C: WICA).

:mod:`~offloadlab.writeback.sim` simulates the page cache's flushing with readers and
bursty writers on one disk; :mod:`~offloadlab.writeback.controllers` holds the
throttling controllers (D-WICA, P-WICA, Linux's dirty throttling, none);
:mod:`~offloadlab.writeback.scenarios` the named scenarios and the comparison of every
controller on them. The model and the numbers: docs/writeback.md.
"""

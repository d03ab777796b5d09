"""``offload study``: calibrate the model on the testbed, predict with model and
simulator, measure, compare and decide (see ``docs/study.md``).

:mod:`~offloadlab.study.pipeline` takes a study from its settings to its output
folder; :mod:`~offloadlab.study.plan` checks what to run,
:mod:`~offloadlab.study.measure` runs the testbed, :mod:`~offloadlab.study.run` drives
the phases, :mod:`~offloadlab.study.compare` builds the report's tables
(:mod:`~offloadlab.study_tables`).
"""

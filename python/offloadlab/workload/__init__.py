"""Web workloads: what the load generator requests and the simulator replays.

- :mod:`~offloadlab.workload.classes` — seed 000's five size classes (one function owns
  the mapping from bytes to class).
- :mod:`~offloadlab.workload.fileset` — file sets: generated in memory from a spec,
  materialised on disk with a manifest, verified against it; specs read from TOML.
- :mod:`~offloadlab.workload.specs` — file-set specs: SURGE-like sets and SPECweb99's
  layout, checked when made (the checks are in :mod:`~offloadlab.workload.checks`).
- :mod:`~offloadlab.workload.sizes` — file-size models: SURGE's lognormal body and
  Pareto tail, uniform, log-uniform.
- :mod:`~offloadlab.workload.presets` — named file sets: seed 000's classes, SPECweb99,
  seed 003's working sets, a mixed web set.
- :mod:`~offloadlab.workload.stream` — request streams: the open- and closed-loop
  generators; the entry point, re-importing :mod:`~offloadlab.workload.stream_format`
  (the Parquet format: ``Stream``, ``read``, ``iter_batches``),
  :mod:`~offloadlab.workload.arrivals` (Poisson, constant, ramp),
  :mod:`~offloadlab.workload.counts` (requests per connection, embedded files),
  :mod:`~offloadlab.workload.sessions` (SPECweb2005-like sessions) and
  :mod:`~offloadlab.workload.page_mixes` (their page mixes). They share
  :mod:`~offloadlab.workload.objects` (what requests draw from),
  :mod:`~offloadlab.workload.connections` (keep-alive grouping) and
  :mod:`~offloadlab.workload.stream_args` (argument checks, seeds).
- :mod:`~offloadlab.workload.traces` — World Cup 98 and Common/Combined Log Format
  readers, and synthetic traces.
- :mod:`~offloadlab.workload.replay` — a trace made replayable: its objects as a file
  set, its requests as an open-loop stream for the load generator.
- :mod:`~offloadlab.workload.analyze` — what a trace or a manifest holds: the size and
  popularity fits of :mod:`~offloadlab.workload.fits` and the class, connection and
  arrival statistics of :mod:`~offloadlab.workload.stats`.

The modules are imported on their own (``from offloadlab.workload import fileset``);
this package imports none of them, so using one never pays for the others.
"""

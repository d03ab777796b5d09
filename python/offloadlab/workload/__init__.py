"""Web workloads: what the load generator requests and the simulator replays.

- :mod:`~offloadlab.workload.classes` — seed 000's five size classes (one function owns
  the mapping from bytes to class).
- :mod:`~offloadlab.workload.fileset` — SURGE-like file sets and the presets (seed 000's
  classes, SPECweb99, seed 003's working sets, a mixed web set): generated in memory,
  materialised on disk with a manifest, verified against it.
- :mod:`~offloadlab.workload.stream` — request streams: open arrivals, closed clients,
  sessions.
- :mod:`~offloadlab.workload.traces` — World Cup 98 and Common/Combined Log Format
  readers, and synthetic traces.
- :mod:`~offloadlab.workload.analyze` — size, popularity, class, connection and arrival
  statistics of a trace or a manifest.

The modules are imported on their own (``from offloadlab.workload import fileset``);
this package imports none of them, so using one never pays for the others.
"""

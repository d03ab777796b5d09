"""The testbed: a real server under real HTTP load.

:mod:`offloadlab.testbed.server` runs the Rust server (``inline``, ``engine`` with a
software offload engine, ``uring``) with checked options, in the foreground or on a
worker thread; :mod:`offloadlab.testbed.load` drives the Rust load generator with a
request stream; :mod:`offloadlab.testbed.modes` sends the same load to each mode in
turn and keeps both sides' reports, which :mod:`offloadlab.documents` reads
into dataclasses; :mod:`offloadlab.testbed.squid` runs Squid as a reverse proxy in
front of the server, pinned to a core (seed 001's set-ups B and C).
"""

"""OffloadLab: does offloading protocol work to an offload engine help a web server?

The package holds the scenario format (:mod:`offloadlab.scenario`), service-time
distributions (:mod:`offloadlab.dist`), the closed-form queueing models
(:mod:`offloadlab.model`), terminal and figure reports (:mod:`offloadlab.report`)
and the ``offload`` command (:mod:`offloadlab.cli`).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("offloadlab")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

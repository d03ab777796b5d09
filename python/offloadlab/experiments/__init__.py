"""The paper experiments measured on the testbed (:mod:`offloadlab.testbed`): seed 004's
handoff policies (:mod:`~offloadlab.experiments.handoff`), online placement
(:mod:`~offloadlab.experiments.online`), the engine's wait strategy
(:mod:`~offloadlab.experiments.wait`), seed 001's application cache
(:mod:`~offloadlab.experiments.appcache`), seed 003's hybrid placement, tiers and NIC
offloads (:mod:`~offloadlab.experiments.hybrid`, :mod:`~offloadlab.experiments.multitier`,
:mod:`~offloadlab.experiments.nic`).
"""

"""Seed 004's connection handoff (Kim & Rixner): the workloads the packet-level simulator
replays, the simulation runs over them and the experiment matrix of the paper."""

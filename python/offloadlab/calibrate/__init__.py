"""Fitting the model to testbed measurements and scoring it against them
(:mod:`~offloadlab.calibrate.fit`)."""

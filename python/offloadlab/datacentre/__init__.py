"""Seed 003's multi-tier data centre: the data-centre file (:mod:`.config`) and the
studies that repeat the paper's experiments on the model (:mod:`.studies`). The model
itself is :mod:`offloadlab.model.tiers`."""

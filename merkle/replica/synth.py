"""What the generator and every layout's part of it share, below both: the generator's error
and the pristine bytes of a block (merkle.replica.generate writes clusters with them; a
layout that moves a generated cluster onto its own volumes, merkle.replica.ozone.generate,
rebuilds metadata from them). Imports nothing of the generator nor of the layouts."""

from __future__ import annotations

import numpy as np

from merkle.replica.errors import ReplicaError

__all__ = ["GeneratorError", "block_data"]


class GeneratorError(ReplicaError):
    """Bad generator parameters, or faults that do not fit the cluster."""


def block_data(seed: int, container_id: int, block_id: int, length: int) -> bytes:
    """The pristine bytes of a block (depends only on seed, container and block)."""
    return np.random.default_rng([seed & 0xFFFFFFFF, container_id, block_id, 0xB10C]).bytes(length)

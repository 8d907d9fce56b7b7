"""Shared by the simulator's unit tests: reproducible random model profiles.

    def test_x(random_profile):
        profile = random_profile(np.random.RandomState(0), grid=True)
"""
from __future__ import annotations

import numpy as np
import pytest

from simddp.inputs.profile import Layer, ModelProfile

MB = 2**20
# Sizes that hit the bucket rule's edges: tiny, exactly 1 MiB (DDP's first bucket), a few MiB.
_SIZES_BYTES = (4, 1000, 4096, MB // 2, MB, 3 * MB, 10 * MB)


def _random_profile(rng: np.random.RandomState, *, grid: bool = False,
                    measured: bool = False) -> ModelProfile:
    """1–60 layers, 0–4 tensors each, times incl. zeros; ``grid``: multiples of 0.5 ms and
    1 MiB, so lanes switch at the same instants (ties are where event engines break)."""
    def seconds(n: int, high_ms: float) -> list[float]:
        if grid:
            t = rng.randint(0, int(2 * high_ms) + 1, size=n) * 0.5e-3
        else:
            t = rng.uniform(0, high_ms * 1e-3, size=n)
        return np.where(rng.rand(n) < 0.2, 0.0, t).tolist()   # a fifth are exactly zero

    n_layers = rng.randint(1, 61)
    counts = rng.randint(0, 5, size=n_layers)
    if grid:
        sizes = (rng.randint(1, 4, size=counts.sum()) * MB).tolist()
    else:
        sizes = (np.array(_SIZES_BYTES)[rng.randint(len(_SIZES_BYTES), size=counts.sum())]
                 * rng.randint(1, 4, size=counts.sum())).tolist()
    fwd, bwd, (opt,) = seconds(n_layers, 2.0), seconds(n_layers, 4.0), seconds(1, 5.0)
    ends = np.cumsum(counts).tolist()
    layers = tuple(Layer(f"l{i}", tuple(sizes[end - k:end]), fwd[i], bwd[i])
                   for i, (k, end) in enumerate(zip(counts.tolist(), ends)))
    order = None
    if measured and sizes:
        order = tuple(rng.permutation(len(sizes)).tolist())
    return ModelProfile("random", layers, opt, order)


@pytest.fixture
def random_profile():
    return _random_profile

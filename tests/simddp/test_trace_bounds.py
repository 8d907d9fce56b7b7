"""What a link fitted to a trace may say (simddp/ingest/trace/bounds.py): the sizes must pin α
and busbw down, and both stay within physical bounds; the contention a trace implies is
clamped. Numbers in, numbers and verdicts out; no torch.
"""
from __future__ import annotations

import numpy as np
import pytest

from simddp.ingest.trace.bounds import (ALPHA_MAX_S, CPU_ALPHA_MAX_S, CPU_CAPS, GPU_CAPS,
                                        busbw_max_gbps, clamp_contention, line_fit,
                                        out_of_bounds, unpinned)
from simddp.ingest.trace.fit import fit_compute_slowdown
from simddp.presets.links import LINKS

MIB = 2**20


def _times(sizes, alpha_s, busbw_gbps, world=8, noise_s=0.0, seed=0):
    n = np.repeat(np.asarray(sizes, dtype=float), 10)
    t = alpha_s + 2 * (world - 1) / world * n / (busbw_gbps * 1e9)
    return n, t + np.random.default_rng(seed).normal(0.0, noise_s, n.size)


def test_a_line_through_sizes_that_span_enough_gives_the_law_and_is_pinned():
    n, t = _times([1 * MIB, 8 * MIB, 64 * MIB], 40e-6, 150.0, noise_s=5e-6)
    line = line_fit(n, t, 8)
    assert line.alpha_s == pytest.approx(40e-6, abs=10e-6)
    assert line.busbw_gbps == pytest.approx(150.0, rel=0.02)
    assert line.alpha_se_s < 5e-6 and line.beta_rel_se < 0.01
    assert unpinned(line) is None and out_of_bounds(line.alpha_s, line.busbw_gbps, "cuda") is None


@pytest.mark.parametrize("sizes, noise_s", [
    ([8 * MIB, 30 * MIB], 0.0),                     # two sizes
    ([8 * MIB, 9 * MIB, 10 * MIB], 0.0),             # a span under 2x
    ([8 * MIB, 16 * MIB, 30 * MIB], 400e-6),         # noise that swamps the bandwidth term
])
def test_sizes_that_cannot_pin_the_line_are_said(sizes, noise_s):
    n, t = _times(sizes, 40e-6, 150.0, noise_s=noise_s)
    assert unpinned(line_fit(n, t, 8)) is not None


def test_a_flat_line_has_no_bandwidth_term():
    n = np.repeat([MIB, 24 * MIB, 173 * MIB], 4).astype(float)
    t = np.full(n.size, 1.95e-3) - 1e-9 * n / MIB     # a little faster when larger
    line = line_fit(n, t, 8)
    assert line.busbw_gbps is None and unpinned(line) is not None


def test_bounds_alpha_by_device_and_busbw_by_the_fastest_preset():
    fastest = max(link.busbw_gbps for link in LINKS.values())
    assert busbw_max_gbps() == pytest.approx(1.5 * fastest)
    assert out_of_bounds(1.945e-3, 100.0, "cuda") is not None
    assert out_of_bounds(1.945e-3, 100.0, "cpu") is None           # Gloo on a CPU host
    assert out_of_bounds(CPU_ALPHA_MAX_S * 1.1, 1.0, "cpu") is not None
    assert out_of_bounds(ALPHA_MAX_S, 7540.0, "cuda") is not None
    assert out_of_bounds(ALPHA_MAX_S, busbw_max_gbps(), "cuda") is None


def test_contention_a_trace_implies_is_clamped_on_a_gpu_only_past_the_caps():
    compute, comm, why = clamp_contention(2.56, 1.2, "cuda")
    assert (compute, comm) == (GPU_CAPS[0], 1.2) and why is not None
    assert clamp_contention(2.56, 1.2, "cpu") == (2.56, 1.2, None)
    assert clamp_contention(9.0, 9.0, "cpu")[:2] == CPU_CAPS


def test_compute_slowdown_keeps_what_it_implied_past_its_cap():
    groups = {"block": [(1.0, 0.0), (1.0, 0.1), (3.0, 1.0), (3.0, 0.95)]}
    fit = fit_compute_slowdown(groups, cap=GPU_CAPS[0])
    assert fit.slowdown == GPU_CAPS[0] and fit.implied == pytest.approx(3.1, abs=0.1)
    assert fit_compute_slowdown(groups).implied is None

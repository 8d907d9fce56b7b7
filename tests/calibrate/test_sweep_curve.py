"""Issue 51 item 2: calibrate writes its sweep as the link's measured all-reduce curve where the
curve predicts the held-out sizes better than the line (calibrate/curves.py), moved by the
step's α less a lone call's; a sweep that is a line keeps the line alone, and so does a Gloo
link (the box's laws were validated against the line), so links from these predict what they
did before curves existed.

    python -m pytest tests/calibrate/test_sweep_curve.py -q      # no processes, < 5 s

Synthetic ranks as run_rank returns them (tests/calibrate/test_degenerate.py builds the same).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from calibrate.analysis import Calibration, analyse
from calibrate.files import write_outputs
from calibrate.fit import predict_s
from calibrate.settings import CalibrateSettings
from realrun.launch.world import WorldConfig
from simddp.inputs.io import load_link
from simddp.cost import collective_s
from tests._messages import assert_names

SIZES = 4096 * 4 ** np.arange(9)       # 4 KiB .. 256 MiB


def _ranks(sweep_s, async_s=None) -> list[dict]:
    rows = [{"size_bytes": int(n), "count": int(n) // 4, "times_s": [float(t)] * 5}
            for n, t in zip(SIZES, sweep_s)]
    out = [{"rank": r, "world_size": 2, "sweep": rows} for r in range(2)]
    if async_s is not None:
        for rank in out:
            rank["sequence"] = {"blocking_s": [a * 1.2 for a in async_s], "async_s": list(async_s)}
    return out


def _settings(backend="nccl", **kw) -> CalibrateSettings:
    return CalibrateSettings(min_bytes=4096, max_bytes=int(SIZES[-1]), factor=4, world_sizes=(2,),
                             sequence_count=8, contention=False, kinds=(), progress=False,
                             world=WorldConfig(world_size=2, backend=backend), **kw)


def _bent(n):
    """NCCL-like: busbw that only reaches its peak at large sizes (a power law in between)."""
    return 20e-6 * (np.asarray(n, float) / 4096) ** 0.6


def test_a_bent_sweep_becomes_the_links_curve_and_simddp_reads_it(tmp_path):
    world = analyse(_settings(sequence=False), 2, _ranks(_bent(SIZES)))
    assert world.curve.curve is not None
    assert world.curve.curve_median_rel_err < world.curve.line_median_rel_err
    (curve,) = world.link.curves
    assert curve.bytes == tuple(int(n) for n in SIZES) and curve.ranks == 2
    # every measured size is charged what was measured, not the line's figure
    for n in SIZES:
        assert collective_s(world.link, "all_reduce", int(n), 2) == pytest.approx(_bent(n))
    paths = write_outputs(Calibration(_settings(sequence=False), [world], 0.1, 1.0), tmp_path,
                          plots=False)
    link = load_link(next(p for p in paths if p.name == "link.json"))
    assert link.curves == world.link.curves
    run = json.loads((tmp_path / "allreduce.json").read_text())["runs"][0]
    assert run["curve"]["used"] is True
    assert run["curve"]["curve_median_rel_err"] < run["curve"]["line_median_rel_err"]


def test_a_sweep_that_is_a_line_keeps_the_line_alone(tmp_path):
    times = predict_s(30e-6, 10.0, SIZES, 2) * (1 + 0.02 * np.cos(np.arange(len(SIZES)) * 2.1))
    world = analyse(_settings(sequence=False), 2, _ranks(times))
    assert world.curve.curve is None
    assert world.curve.curve_median_rel_err >= world.curve.line_median_rel_err
    assert world.link.curves == ()
    write_outputs(Calibration(_settings(sequence=False), [world], 0.1, 1.0), tmp_path, plots=False)
    assert "curves" not in json.loads((tmp_path / "link.json").read_text())


def test_the_curve_moves_by_the_steps_alpha_less_a_lone_calls():
    # lone calls cost 20 µs of fixed time; inside a step 8 back-to-back calls of 64 KiB cost
    # what the sequence step says: the link's α is the step's, and the curve moves with it
    world = analyse(_settings(), 2, _ranks(_bent(SIZES), async_s=[8 * 300e-6] * 5))
    shift_s = world.curve.alpha_shift_s
    assert shift_s == pytest.approx(world.sequence["alpha_s"] - world.lone_fit.alpha_s)
    assert shift_s > 0 and world.curve.curve is not None
    (curve,) = world.link.curves
    big = int(SIZES[-1])
    assert curve.seconds_at(big) == pytest.approx(_bent(big) + shift_s)
    assert_names(curve.source, f"{shift_s * 1e6:+.1f}")   # it says by how much (µs)


def test_gloo_keeps_the_line_and_records_what_the_curve_would_score(tmp_path):
    world = analyse(_settings("gloo", sequence=False), 2, _ranks(_bent(SIZES)))
    assert world.curve.curve is None and world.link.curves == ()
    # the curve would have won: why names the backend that keeps the line
    assert world.curve.curve_median_rel_err < world.curve.line_median_rel_err
    assert_names(world.curve.why, "gloo")
    write_outputs(Calibration(_settings("gloo", sequence=False), [world], 0.1, 1.0), tmp_path,
                  plots=False)
    assert "curves" not in json.loads((tmp_path / "link.json").read_text())
    run = json.loads((tmp_path / "allreduce.json").read_text())["runs"][0]
    assert run["curve"]["used"] is False
    assert run["curve"]["curve_median_rel_err"] < run["curve"]["line_median_rel_err"]

"""Issue 53 item 3: one held-out figure per line, computed once, printed once, and the warning
taken from that same figure.

    python -m pytest tests/calibrate/test_report_heldout.py -q      # no processes, < 10 s

Before, calibrate printed the lone fit's "held-out 5 sizes: median error 32.0%" and later
"WARNING: degenerate fit, link: held-out median error 51% > 50%": the warning judged the link
line (α held at the step's) on its bandwidth-bound held-out sizes, a figure printed nowhere,
while the link's source and the world-size table carried a third (the link line over every
held-out size). Synthetic ranks, as tests/calibrate/test_degenerate.py builds them.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from calibrate.analysis import Calibration, analyse
from calibrate.files import results_json
from calibrate.fit import predict_s
from calibrate.judged import BANDWIDTH_BOUND
from calibrate.report import print_report
from calibrate.settings import CalibrateSettings
from tests._messages import assert_names

SIZES = 4096 * 2 ** np.arange(13)      # 4 KiB .. 16 MiB; held out: 8K, 64K, 512K, 4M


def _ranks(times_s, lone_s=3e-4) -> list[dict]:
    rows = [{"size_bytes": int(n), "count": int(n) // 4, "times_s": [float(t)] * 5}
            for n, t in zip(SIZES, times_s)]
    seq = {"blocking_s": [8 * 1.5e-3] * 5, "async_s": [8 * 1.2e-3] * 5,
           "lone_s": [lone_s + 4096 / 1e9] * 20, "lone_bytes": 4096}
    return [{"rank": r, "world_size": 2, "sweep": rows, "sequence": seq} for r in range(2)]


def _lines(out: str, first: str) -> list[str]:
    """The lines of ``out`` whose first word is ``first``."""
    return [line for line in out.splitlines() if line.split()[:1] == [first]]


def _settings() -> CalibrateSettings:
    return CalibrateSettings(min_bytes=4096, max_bytes=16 << 20, world_sizes=(2,),
                             sequence_count=8, contention=False, kinds=(), progress=False)


def _world(slow: float):
    """The law α 0.3 ms, busbw 1 GB/s, with the held-out 512 KiB and 4 MiB ``slow`` times
    slower (held out, they leave the fits alone): the lone line's figure (every held-out
    size) and the link line's (those taking ≥ 2α) differ."""
    times = predict_s(3e-4, 1.0, SIZES, 2)
    times[np.isin(SIZES, [512 << 10, 4 << 20])] *= slow
    return analyse(_settings(), 2, _ranks(times))


def _report(worlds) -> str:
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_report(Calibration(_settings(), worlds), [])
    return buf.getvalue()


@pytest.mark.parametrize("slow", [1.5, 3.0])
def test_the_warning_reads_the_printed_figure(slow):
    world = _world(slow)
    held = world.heldout
    assert held["judged_on"] == BANDWIDTH_BOUND
    assert held["heldout_bytes"] == [524288, 4 << 20]       # 8K and 64K take < 2α
    out = _report([world])
    # the link line's figure, printed once, on its own line (with what it is judged on)
    (line,) = _lines(out, "judged")
    printed = held["median_rel_err"]
    assert_names(line, f"{printed:.1%}")
    assert BANDWIDTH_BOUND in line
    # the lone line's figure is a different quantity, printed once too, of its 4 sizes
    (lone,) = _lines(out, "held-out")
    assert_names(lone, "4", f"{world.lone_heldout['median_rel_err']:.1%}")
    # the warning appears exactly when that printed figure is over 50 %, with its number
    warned = _lines(out, "WARNING:")
    assert bool(warned) == (printed > 0.5)
    if warned:
        (w,) = warned
        assert_names(w, "link", f"{printed:.0%}", "50%")
        assert BANDWIDTH_BOUND in w
    # the link file's source and allreduce.json carry the same figure, not a third one
    assert_names(world.link.source, f"{held['median_rel_err']:.1%}")
    assert BANDWIDTH_BOUND in world.link.source
    assert re.search(r"R²\(log t\)=(\S+?)[,;]", world.link.source).group(1) == \
        f"{held['r2_log']:.4f}"
    saved = results_json(Calibration(_settings(), [world]), {2: "link.json"})["runs"][0]
    assert saved["heldout"]["median_rel_err"] == held["median_rel_err"]


def test_slow_enough_to_warn_and_not():
    # the two cases above straddle the 50 % bound: each slow size misses by 1 − 1/slow
    assert _world(1.5).heldout["median_rel_err"] < 0.5 < _world(3.0).heldout["median_rel_err"]
    assert not any("held-out" in p for p in _world(1.5).problems)
    assert any("held-out" in p for p in _world(3.0).problems)


def test_world_size_table_shows_the_judged_figures():
    world = _world(3.0)
    out = _report([world, world])
    row = [x for x in out.splitlines() if x.strip().startswith("2 ")][0].split()
    assert float(row[3]) == pytest.approx(world.heldout["r2_log"], abs=1e-4)
    assert row[4] == f"{world.heldout['median_rel_err']:.1%}"


def test_without_the_sequence_step_one_line_is_judged_on_every_size():
    times = predict_s(3e-4, 1.0, SIZES, 2)
    ranks = _ranks(times)
    for r in ranks:
        del r["sequence"]
    s = CalibrateSettings(min_bytes=4096, max_bytes=16 << 20, world_sizes=(2,),
                          sequence=False, contention=False, kinds=(), progress=False)
    world = analyse(s, 2, ranks)
    assert world.heldout is world.lone_heldout and world.heldout["judged_on"] == "every size"
    assert world.heldout["r2_log"] == world.fit.r2
    out = _report([world])
    assert not _lines(out, "judged")
    (lone,) = _lines(out, "held-out")
    assert_names(lone, "4", f"{world.heldout['median_rel_err']:.1%}")

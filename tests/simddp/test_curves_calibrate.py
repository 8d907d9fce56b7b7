"""calibrate writes its sweep into link.json as curves, which simddp then charges by."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("calibrate.files")

from calibrate.files import link_with_curves, sweep_curves  # noqa: E402
from simddp.io import link_from_json, link_to_json  # noqa: E402
from simddp.link import Link  # noqa: E402


def test_the_sweep_becomes_one_curve_per_kind_and_round_trips():
    rows = [{"size_bytes": n, "time_s": t} for n, t in ((4096, 3e-4), (1 << 20, 5e-3),
                                                         (1 << 22, 2e-2))]
    kind = SimpleNamespace(rows=[{"size_bytes": 4096, "time_s": 2e-4}])   # one size: no curve
    run = SimpleNamespace(world_size=2, rows=rows, kinds={"all_gather": kind}, levels=None,
                          link=Link("cal", 4e-4, 0.2, world_size=2))
    (curve,) = sweep_curves(run)
    assert (curve.kind, curve.ranks, curve.bytes) == ("all_reduce", 2, (4096, 1 << 20, 1 << 22))
    link = link_from_json(link_to_json(link_with_curves(run)))
    assert link.allreduce_s(1 << 20, 2) == 5e-3
    assert link.collective_s("all_gather", 1 << 20, 2) == pytest.approx(4e-4 + 0.5 * 2**20 / 0.2e9)

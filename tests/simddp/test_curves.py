"""Measured curves in a link: read in log–log, α–β past the ends, moved across ranks by
busbw, checked on load with one-line errors, and no change for a file without them."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from simddp.errors import InputError
from simddp.inputs.io import link_from_json, link_to_json
from simddp.cost import collective_s, parts
from simddp.cost.curve import Curve
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.link import Link

AR = {"kind": "all_reduce", "ranks": 8, "bytes": [1024, 1 << 20, 1 << 30],
      "seconds": [10e-6, 40e-6, 4000e-6]}


def curved(*curves) -> Link:
    return Link("c", 30e-6, 370.0, curves=list(curves))


def test_points_are_exact_and_between_them_log_log():
    link = curved(AR)
    assert collective_s(link, "all_reduce", 1 << 20, 8) == 40e-6
    assert collective_s(link, "all_reduce", 1 << 30, 8) == 4000e-6
    # halfway in log bytes between 1 MiB and 1 GiB (32 MiB): the geometric mean of the times
    assert collective_s(link, "all_reduce", 1 << 25, 8) == pytest.approx(math.sqrt(40e-6 * 4000e-6))


def test_beyond_the_ends_alpha_beta_of_the_end_points():
    c = Curve("all_reduce", 8, (1000, 2000), (10e-6, 12e-6))
    assert c.seconds_at(500) == pytest.approx(8e-6 + 2e-9 * 500)    # α 8 µs, 2 ns/B
    assert c.seconds_at(4000) == pytest.approx(8e-6 + 2e-9 * 4000)
    # a line that would cross zero is clamped to α = 0 through the end point
    steep = Curve("all_reduce", 8, (1000, 2000), (1e-6, 10e-6))
    assert steep.seconds_at(500) == pytest.approx(0.5e-6)
    # a falling end is held flat (a 2-node table is not monotonic)
    falling = Curve("all_reduce", 8, (1000, 2000), (12e-6, 10e-6))
    assert falling.seconds_at(8000) == 10e-6


def test_other_rank_counts_through_busbw_and_exact_ranks_preferred():
    link = curved(AR)
    # 8 -> 2 ranks: × (2·1/2) / (2·7/8) = 1 / 1.75
    assert collective_s(link, "all_reduce", 1 << 20, 2) == pytest.approx(40e-6 / 1.75)
    at2 = {**AR, "ranks": 2, "seconds": [1e-6, 2e-6, 3e-6]}
    assert collective_s(curved(AR, at2), "all_reduce", 1 << 20, 2) == 2e-6
    assert collective_s(curved(AR, at2), "all_reduce", 1 << 20, 8) == 40e-6


def test_a_kind_without_a_curve_keeps_alpha_beta_and_algorithms_take_the_fastest():
    link = curved(AR)
    assert collective_s(link, "all_gather", 1e6, 8) == pytest.approx(30e-6 + 7 / 8 * 1e6 / 370e9)
    ring = {**AR, "algorithm": "ring", "seconds": [10e-6, 50e-6, 5000e-6]}
    nvls = {**AR, "algorithm": "nvls", "seconds": [20e-6, 40e-6, 4000e-6]}
    both = curved(ring, nvls)
    assert collective_s(both, "all_reduce", 1024, 8) == 10e-6
    assert collective_s(both, "all_reduce", 1 << 30, 8) == 4000e-6


def test_parts_split_a_curve_into_its_low_end_alpha_and_the_rest():
    fixed, rest = parts(curved(AR), "all_reduce", 1 << 20, 8)
    assert fixed + rest == pytest.approx(40e-6)
    assert 0 < fixed < 10e-6


def test_a_waited_for_call_on_a_curve_pays_the_link_wait():
    link, host = curved(AR), GlooHost(blocking_alpha_s=50e-6)
    assert collective_s(link, "all_reduce", 1 << 20, 8, blocking=True,
                        host=host) == pytest.approx(60e-6)


def test_round_trip_and_files_without_curves_unchanged():
    doc = link_to_json(curved(AR))
    assert doc["curves"][0] == {"kind": "all_reduce", "ranks": 8, "nodes": 1, "algorithm": None,
                                "source": "", **{k: AR[k] for k in ("bytes", "seconds")}}
    assert link_from_json(json.loads(json.dumps(doc))) == curved(AR)
    assert "curves" not in link_to_json(Link("l", 1e-5, 1.0))


def test_time_scaled_and_overrides():
    link = curved(AR)
    assert link.time_scaled(2.0).collective_s("all_reduce", 1 << 20, 8) == pytest.approx(80e-6)
    assert link.with_overrides(busbw_gbps=100.0).curves == ()


@pytest.mark.parametrize("change, field", [
    ({"kind": "broadcast"}, "curves[0].kind"),
    ({"ranks": 1}, "curves[0].ranks"),
    ({"nodes": 3}, "curves[0].nodes"),
    ({"bytes": [2048, 1024, 4096]}, "curves[0].bytes"),
    ({"bytes": [1024]}, "curves[0].bytes"),
    ({"seconds": [1e-6, 0.0, 1e-3]}, "curves[0].seconds"),
    ({"seconds": [1e-6, 1e-3]}, "curves[0].seconds"),
    ({"algorithm": 3}, "curves[0].algorithm"),
    ({"speed": 1}, "unknown field(s) speed"),
])
def test_bad_curves_name_the_field(change, field):
    body = {"format": "simddp.link/1", "name": "c", "alpha_s": 1e-5, "busbw_gbps": 1.0,
            "curves": [{**AR, **change}]}
    with pytest.raises(InputError) as e:
        link_from_json(body, "link.json")
    assert field in str(e.value) and "\n" not in str(e.value)


def test_missing_link_fields_are_named_one_line_exit_2(tmp_path):
    path = tmp_path / "link.json"
    path.write_text('{"format": "simddp.link/1"}')
    r = subprocess.run([sys.executable, "-m", "simddp", "sweep", "--link", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert all(field in r.stderr for field in ("name", "alpha_s", "busbw_gbps"))
    assert str(path) in r.stderr

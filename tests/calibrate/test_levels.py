"""Calibrate per level (issue 22 item 2): when the step runs, the fits of each level from
synthetic rank timings, the link file's levels section, the report, and (slow) the rank code
on 4 Gloo ranks faked as 2 nodes × 2 without network namespaces.

    python -m pytest tests/calibrate/test_levels.py -q -m "not slow"   # seconds, no processes

Synthetic laws on round numbers, 2 nodes × 2 ranks: the world's ring over 4 ranks α 500 µs,
0.25 GB/s; inside a node α 100 µs, 1.0 GB/s (reduce-scatter 0.5, all-gather 0.8); across
nodes α 1000 µs, 0.125 GB/s.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from calibrate import cli
from calibrate.analysis import Calibration, analyse
from calibrate.files import write_outputs
from calibrate.fit import MAX_BUSBW_GBPS, predict_s
from calibrate.levels import with_levels
from calibrate.report import print_report
from calibrate.settings import CalibrateSettings
from realrun.launch.world import WorldConfig
from simddp.errors import InputError
from simddp.inputs.io import load_levels, load_link
from tests._messages import assert_names, assert_one_line

SIZES = 1024 * 2 ** np.arange(17)     # 1 KiB .. 64 MiB, the default sweep
KIND_SIZES = SIZES[:-2]               # the kinds' default: up to a quarter of 64 MiB
LAWS = {"world": (500e-6, 0.25, 4), "intra": (100e-6, 1.0, 2), "inter": (1000e-6, 0.125, 2)}
INTRA_KINDS = {"reduce_scatter": 0.5, "all_gather": 0.8}
TWO_BY_TWO = WorldConfig(world_size=4, emulate_hosts=2)


def _sweep(alpha_s, busbw, p, kind="all_reduce", sizes=SIZES, jitter=0.0, rng=None):
    law = predict_s(alpha_s, busbw, sizes, p, kind)
    noise = (lambda: 1 + jitter * rng.uniform(-1, 1, 5)) if jitter else (lambda: np.ones(5))
    return [{"size_bytes": int(n), "count": int(n) // 4, "times_s": (t * noise()).tolist()}
            for n, t in zip(sizes, law)]


def _ranks(jitter: float = 0.0) -> list[dict]:
    """What run_rank returns on each of 4 ranks with the per-level step (no sequence)."""
    rng = np.random.default_rng(4)
    ranks = []
    for rank in range(4):
        intra = {"sweep": _sweep(*LAWS["intra"], jitter=jitter, rng=rng),
                 "kinds": {k: _sweep(100e-6, bw, 2, k, KIND_SIZES, jitter, rng)
                           for k, bw in INTRA_KINDS.items()}}
        ranks.append({"rank": rank, "world_size": 4, "local_world_size": 4, "cpu_count": 4,
                      "sweep": _sweep(*LAWS["world"], jitter=jitter, rng=rng),
                      "levels": {"gpus_per_node": 2, "nodes": 2, "intra": intra,
                                 "inter": {"sweep": _sweep(*LAWS["inter"], jitter=jitter,
                                                           rng=rng)}}})
    return ranks


def _lines(out: str, first: str) -> list[str]:
    """The lines of ``out`` whose first word is ``first``."""
    return [line for line in out.splitlines() if line.split()[:1] == [first]]


def _settings(**kw) -> CalibrateSettings:
    return CalibrateSettings(world=TWO_BY_TWO, contention=False, progress=False, **kw)


def _world(s: CalibrateSettings, ranks=None):
    ranks = ranks or _ranks()
    return with_levels(s, analyse(s, 4, ranks), ranks)


@pytest.mark.parametrize("sequence", [True, False])
def test_each_level_recovers_its_own_law(sequence):
    world = _world(_settings(sequence=sequence))
    lv = world.levels
    assert (lv.gpus_per_node, lv.nodes) == (2, 2)
    for c in (lv.intra, lv.inter):
        alpha_s, busbw, p = LAWS[c.level]
        assert (c.ranks, c.groups, c.link.world_size) == (2, 2, 2)
        assert (c.link.alpha_s, c.link.busbw_gbps) == pytest.approx((alpha_s, busbw), rel=1e-4)
        assert c.link.name == f"{world.link.name}-{c.level}" and not c.problems
    assert lv.intra.alpha_from == ("7 lone sizes up to 64 KiB" if sequence
                                   else "the lone fit (relative residuals)")
    fits = lv.intra.link.kind_fits
    assert set(fits) == set(INTRA_KINDS)
    for kind, busbw in INTRA_KINDS.items():
        assert (fits[kind].alpha_s, fits[kind].busbw_gbps) == pytest.approx((100e-6, busbw),
                                                                            rel=1e-4)
    assert lv.inter.link.kind_fits == {}   # across nodes the hierarchical all-reduce runs one
    # the world's ring keeps the link's top level
    assert (world.link.alpha_s, world.link.busbw_gbps) == pytest.approx((500e-6, 0.25), rel=1e-4)
    levels = lv.levels
    assert (levels.gpus_per_node, levels.intra.link, levels.inter.link) == (
        2, lv.intra.link, lv.inter.link)
    assert (levels.intra.contention, levels.intra.host) == (None, None)   # the level's fit only
    # each level's link file says which subgroups were timed, and how many at once
    assert all(c.where in c.link.source for c in (lv.intra, lv.inter))


def test_noisy_levels_stay_near_their_laws():
    lv = _world(_settings(), _ranks(jitter=0.03)).levels
    assert lv.inter.link.busbw_gbps == pytest.approx(0.125, rel=0.05)
    assert lv.intra.link.busbw_gbps == pytest.approx(1.0, rel=0.05)
    assert lv.intra.link.time_spread[0] < 1.0 < lv.intra.link.time_spread[1]


def test_a_flat_level_is_flagged_degenerate():
    ranks = _ranks()
    for r in ranks:   # the inter level's time does not grow with size: no slope
        r["levels"]["inter"]["sweep"] = _sweep(2e-3, 1e9, 2)
    lv = _world(_settings(sequence=False), ranks).levels
    assert lv.inter.link.busbw_gbps >= MAX_BUSBW_GBPS / 2 and not lv.intra.problems
    problems = lv.inter.problems
    assert problems[0].split()[:2] == ["inter:", "busbw"]   # the level, and what is at its bound
    assert "DEGENERATE" in lv.inter.link.source
    assert all(p in lv.inter.link.source for p in problems)


def test_the_link_file_gets_levels_simddp_reads_them(tmp_path, capsys):
    s = _settings()
    cal = Calibration(s, [_world(s)], 0.1, 1.0)
    paths = write_outputs(cal, tmp_path, plots=False)
    # the top level: the world's ring, the link analyse made (its curve only where it earned it)
    assert load_link(tmp_path / "link.json") == cal.worlds[0].link
    levels = load_levels(tmp_path / "link.json")
    assert levels == cal.worlds[0].levels.levels
    run = json.loads((tmp_path / "allreduce.json").read_text())["runs"][0]
    assert run["levels"]["inter"]["groups_at_once"] == 2
    assert len(run["levels"]["intra"]["rows"]) == 17
    assert set(run["levels"]["intra"]["kinds"]) == set(INTRA_KINDS)
    assert run["link"]["levels"]["gpus_per_node"] == 2
    print_report(cal, paths)
    out = capsys.readouterr().out
    # a heading per level (its subgroups, as the JSON's "where") and a line per fit, with the
    # figures the link file holds; the kinds against their level's all-reduce
    lv = cal.worlds[0].levels
    for c in (lv.intra, lv.inter):
        assert any(c.where in line for line in _lines(out, "##"))
    (inter,) = _lines(out, "inter:")
    assert_names(inter, "1000", "0.125")
    (reduce_scatter,) = _lines(out, "reduce_scatter:")
    assert_names(reduce_scatter, "100", "0.500", "x0.50")
    (world,) = _lines(out, "world,")     # the flat ring, the link file's top level
    assert_names(world, "500", "0.250")
    from simddp.cli.main import main
    assert main(["sweep", "--model", "mlp-4x1024", "--link", str(tmp_path / "link.json"),
                 "--nodes", "2", "--gpus-per-node", "2", "--bucket-mb", "4",
                 "--strategies", "bucketed,hierarchical", "--format", "json"]) == 0
    topo = json.loads(capsys.readouterr().out)["setup"]["topology"]
    assert topo["hierarchical_inter_busbw_gbps"] == pytest.approx(0.125, rel=1e-4)
    assert topo["intra_busbw_gbps"] == pytest.approx(1.0, rel=1e-4)


def test_when_the_step_runs(monkeypatch):
    assert _settings().gpus_per_node(4) == 2                     # 2 emulated hosts x 2
    assert _settings(levels=False).gpus_per_node(4) is None      # --no-levels
    s = CalibrateSettings(world=TWO_BY_TWO, world_sizes=(2, 4))
    assert (s.gpus_per_node(2), s.gpus_per_node(4)) == (None, 2)  # 2 x 1: one level only
    assert CalibrateSettings().gpus_per_node(2) is None           # loopback: one node
    # realrun validate's short calibration predicts with the world's link: no levels
    assert CalibrateSettings.short(TWO_BY_TWO, [4 << 20] * 3).gpus_per_node(4) is None
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "8"), ("MASTER_ADDR", "node0"),
                        ("LOCAL_WORLD_SIZE", "4")):
        monkeypatch.setenv(name, value)
    assert CalibrateSettings().gpus_per_node(8) == 4              # torchrun: 2 nodes x 4
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert CalibrateSettings().gpus_per_node(8) is None           # torchrun on one node
    with pytest.raises(InputError, match=r"--levels: the world is 1 node\(s\) x 8 rank"):
        CalibrateSettings(levels=True)


@pytest.mark.parametrize("argv, names", [
    (["--levels"], ("--levels", "1", "2")),                              # 1 node x 2 ranks
    (["--levels", "--emulate-hosts", "2"], ("--levels", "2", "1")),     # 2 nodes x 1 rank
])
def test_levels_on_a_one_level_world_is_one_line_exit_2(argv, names, capsys, tmp_path):
    rc = cli.main(argv + ["--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2
    assert_one_line(err, *names)


def test_the_flags():
    on, _ = cli.parse_args(["--emulate-hosts", "2", "--world-sizes", "4", "--out", "/x/y"])
    off, _ = cli.parse_args(["--emulate-hosts", "2", "--world-sizes", "4", "--no-levels",
                             "--out", "/x/y"])
    assert (on.levels, on.gpus_per_node(4), off.levels, off.gpus_per_node(4)) == (
        None, 2, False, None)


@pytest.mark.slow
def test_the_rank_code_on_four_gloo_ranks_as_two_by_two():
    """4 ranks on loopback, G = 2 from the payload (no namespaces): each level's groups are
    the hierarchical all-reduce's, and the analysis turns them into two links."""
    from realrun.launch import run_world
    s = CalibrateSettings(min_bytes=1024, max_bytes=16384, warmup=1, iters=3, sequence=False,
                          contention=False, progress=False, world_sizes=(4,),
                          kinds=("reduce_scatter",), kinds_max_bytes=16384)
    assert s.gpus_per_node(4) is None   # on loopback one node: the payload says G = 2
    payload = {"sizes_bytes": s.sizes_bytes, "dtype": "float32", "warmup": 1, "iters": 3,
               "contention": None, "sequence": None, "progress": False, "kinds": [],
               "kind_sizes_bytes": [], "levels": {
                   "gpus_per_node": 2, "sizes_bytes": s.sizes_bytes, "dtype": "float32",
                   "warmup": 1, "iters": 3, "kinds": ["reduce_scatter"],
                   "kind_sizes_bytes": s.kind_sizes_bytes}}
    ranks = run_world("calibrate.ranks.run:run_rank", payload, world_size=4, timeout_s=60)
    members = [r["levels"]["members"] for r in ranks]
    assert members == [{"intra": [0, 1], "inter": [0, 2]}, {"intra": [0, 1], "inter": [1, 3]},
                       {"intra": [2, 3], "inter": [0, 2]}, {"intra": [2, 3], "inter": [1, 3]}]
    for r in ranks:
        lv = r["levels"]
        assert [row["size_bytes"] for row in lv["inter"]["sweep"]] == s.sizes_bytes
        assert all(len(row["times_s"]) == 3 for row in lv["intra"]["sweep"])
        # a reduce-scatter among the node's 2 ranks: n rounded to a multiple of 2 elements
        assert [row["size_bytes"] for row in lv["intra"]["kinds"]["reduce_scatter"]] == \
            s.kind_sizes_bytes
    world = with_levels(s, analyse(s, 4, ranks), ranks)
    levels = world.levels.levels
    intra, inter = levels.intra.link, levels.inter.link
    assert (levels.gpus_per_node, intra.world_size, inter.world_size) == (2, 2, 2)
    assert set(intra.kind_fits) == {"reduce_scatter"}
    assert intra.busbw_gbps > 0 and inter.busbw_gbps > 0


def test_the_busbw_plot_shows_each_level_inside_the_figure():
    from calibrate.plots import figures
    from tests.simddp.test_plot_layout import outside
    fig = figures([_world(_settings())], wire_gbps=0.25)["allreduce_busbw.png"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    # per level, its measured points (2 ranks a group, 2 groups at once) and its fit
    for level in ("intra", "inter"):
        measured, fit = [label for label in labels if label.split()[0] == level]
        assert_names(measured, "2")
    assert_names(fit, "1000", "0.125")    # the inter fit's α (µs) and busbw (GB/s)
    assert outside(fig) == []   # the legend beside the axes stays inside the figure

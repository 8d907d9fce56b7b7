"""A link file calibrated per level (issue 22 item 2): its ``levels`` section read and written,
old files unchanged, mismatches one line, and the hierarchical law on the levels' fits.

    python -m pytest tests/simddp/test_levels.py -q     # no processes, a second or two

Round figures, 2 nodes × 2 GPUs, mlp-4x1024's B = 16,777,216 B in one bucket, no compute:
the file's world link (the flat ring over 4 ranks) α 500 µs, 1 GB/s; its levels: inside a node
α 100 µs, all-reduce 100 GB/s, reduce-scatter 25 GB/s, all-gather 50 GB/s; across nodes
(both cross-node pairs at once, sharing a node's NIC) α 1000 µs, 0.5 GB/s.
"""
from __future__ import annotations

import dataclasses
import json

import pytest

from simddp import Layer, Link, ModelProfile, make_strategy, plan, resolve
from simddp.cli.main import main
from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.io import (levels_from_json, link_from_json, link_to_json, load_levels, load_link,
                       save_json)
from simddp.inputs.link import KindFit
from simddp.inputs.link_file import Levels
from simddp.cost.hierarchical import collective_s
from simddp.inputs.topology import Topology, level_load

MIB4 = 4 * 2**20
B = 4 * MIB4
ZERO = ModelProfile("mlp-4x1024, no compute", tuple(Layer(f"l{i}", (MIB4,)) for i in range(4)))
WORLD = Link("ring-p4", 500e-6, 1.0, world_size=4, backend="gloo")
INTRA = Link("ring-p4-intra", 100e-6, 100.0, world_size=2, backend="gloo",
             kind_fits={"reduce_scatter": KindFit(100e-6, 25.0),
                        "all_gather": KindFit(100e-6, 50.0)})
INTER = Link("ring-p4-inter", 1000e-6, 0.5, world_size=2, backend="gloo")
LEVELS = Levels(2, INTRA, INTER)
# by hand, in ms
RING_MS = 0.5 + 2 * 3 / 4 * B / 1e9 * 1e3                    # 25.665824
RS_MS = 0.1 + 1 / 2 * B / 25e9 * 1e3                         # 0.43554432
ACROSS_MS = 1.0 + 2 * 1 / 2 * (B / 2) / 0.5e9 * 1e3          # 17.777216
AG_MS = 0.1 + 1 / 2 * B / 50e9 * 1e3                         # 0.26777216
HIER_MS = RS_MS + ACROSS_MS + AG_MS                          # 18.48053248


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 8)


def run(link, p, world_size, topology=None, record=True):
    """ZERO's step under ``p`` on ``link`` (the link between nodes, with ``topology``)."""
    return simulate(p, resolve(ZERO, link, world_size, topology=topology), record=record)


def test_the_hand_computed_figures():
    assert (round(RING_MS, 8), round(HIER_MS, 8)) == (25.665824, 18.48053248)


def test_hierarchical_inter_phase_takes_the_levels_inter_fit_the_ring_the_world_fit():
    topo = LEVELS.topology(2, 2)
    assert (topo.intra, topo.inter) == (INTRA, INTER)
    assert ms(collective_s(topo, WORLD, "all_reduce", B, "hierarchical")) == round(HIER_MS, 8)
    assert ms(collective_s(topo, WORLD, "all_reduce", B, "ring")) == round(RING_MS, 8)
    # without the levels' inter fit the middle phase ran on the world link: α 500 µs, 1 GB/s
    alone = Topology(2, 2, INTRA)
    assert ms(collective_s(alone, WORLD, "all_reduce", B, "hierarchical")) == round(
        RS_MS + 0.5 + B / 2 / 1e9 * 1e3 + AG_MS, 8)
    # the engine runs the same law: one bucket, no compute
    hier = run(WORLD, plan(ZERO, make_strategy("hierarchical", 1000)), 4, topology=topo)
    flat = run(WORLD, plan(ZERO, make_strategy("bucketed", 1000)), 4, topology=topo)
    assert (ms(hier.step_s), ms(flat.step_s)) == (round(HIER_MS, 8), round(RING_MS, 8))
    load = level_load(topo, WORLD, plan(ZERO, make_strategy("hierarchical", 1000)))
    assert ms(load["inter_node_s"]) == round(ACROSS_MS, 8)
    assert ms(load["intra_node_s"]) == round(RS_MS + AG_MS, 8)


@pytest.mark.parametrize("name", ["bucketed", "hierarchical", "fsdp", "ddp"])
def test_one_node_or_one_gpu_per_node_ignores_the_inter_fit(name):
    p = plan(ZERO, make_strategy(name, 4))
    one_node = run(WORLD, p, 2, topology=Topology(1, 2, INTRA, INTER), record=False)
    assert one_node.step_s == run(INTRA, p, 2, record=False).step_s
    spread = run(WORLD, p, 4, topology=Topology(4, 1, INTRA, INTER), record=False)
    assert spread.step_s == run(WORLD, p, 4, record=False).step_s


def test_round_trip_and_the_top_level_link_unchanged():
    doc = link_to_json(WORLD, LEVELS)
    assert doc["levels"]["gpus_per_node"] == 2 and "format" not in doc["levels"]["intra"]
    assert doc["levels"]["intra"]["kind_fits"]["reduce_scatter"] == {"alpha_s": 100e-6,
                                                                     "busbw_gbps": 25.0}
    text = json.loads(json.dumps(doc))
    assert link_from_json(text) == WORLD
    assert levels_from_json(text) == LEVELS
    assert link_to_json(WORLD) == {k: v for k, v in doc.items() if k != "levels"}


def test_an_old_file_without_levels_loads_as_before(tmp_path):
    save_json(tmp_path / "old.json", link_to_json(WORLD))
    assert load_link(tmp_path / "old.json") == WORLD
    assert load_levels(tmp_path / "old.json") is None


@pytest.mark.parametrize("change, message", [
    (lambda lv: lv.update(gpus_per_node=1), "levels.gpus_per_node must be an integer >= 2"),
    (lambda lv: lv.pop("inter"), "levels must be {gpus_per_node, intra, inter}"),
    (lambda lv: lv.update(nodes=2), "levels must be {gpus_per_node, intra, inter}"),
    (lambda lv: lv.update(intra=3), "levels.intra must be an object of link fields"),
    (lambda lv: lv["inter"].update(busbw_gbps=0), "busbw_gbps must be a finite number > 0"),
    (lambda lv: lv["intra"].update(wire=1), "levels.intra: unknown link field(s) wire"),
    (lambda lv: lv["intra"].update(world_size=4), "levels.intra.world_size 4 is not"),
])
def test_a_bad_levels_section_is_one_line(tmp_path, change, message):
    doc = link_to_json(WORLD, LEVELS)
    change(doc["levels"])
    save_json(tmp_path / "bad.json", doc)
    for load in (load_link, load_levels):   # refused whichever way the file is read
        with pytest.raises(InputError, match="bad.json: ") as e:
            load(tmp_path / "bad.json")
        assert message in str(e.value) and "\n" not in str(e.value)


def _simulate(capsys, link_file, *extra) -> tuple[int, dict | str]:
    argv = ["simulate", "--strategy", "hierarchical", "--bucket-mb", "1000", "--model",
            "mlp-4x1024", "--forward-ms", "0", "--backward-ms", "0", "--optimizer-ms", "0",
            "--link", str(link_file), "--format", "json", *extra]
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else err)


def test_the_cli_takes_both_levels_from_the_link_file(tmp_path, capsys):
    save_json(tmp_path / "link.json", link_to_json(WORLD, LEVELS))
    two = ["--nodes", "2", "--gpus-per-node", "2"]
    rc, out = _simulate(capsys, tmp_path / "link.json", *two)
    assert rc == 0 and round(out["step_ms"], 8) == round(HIER_MS, 8)
    # --intra-link replaces the levels: the inter phase is on --link again (α 0.5 ms, 1 GB/s)
    rc, out = _simulate(capsys, tmp_path / "link.json", *two, "--intra-link", "nvlink-a100",
                        "--intra-alpha-us", "100", "--intra-busbw-gbps", "100")
    plain = 2 * (0.1 + B / 2 / 100e9 * 1e3) + 0.5 + B / 2 / 1e9 * 1e3
    assert rc == 0 and round(out["step_ms"], 6) == round(plain, 6)
    # --busbw-gbps describes the link between nodes by hand: it replaces the inter fit too
    rc, out = _simulate(capsys, tmp_path / "link.json", *two, "--busbw-gbps", "2")
    assert rc == 0 and round(out["step_ms"], 8) == round(RS_MS + 0.5 + B / 2 / 2e9 * 1e3
                                                          + AG_MS, 8)
    # --intra-* overrides apply to the levels' intra link, and make it one line (as
    # --alpha-us does to kind_fits): reduce-scatter and all-gather at its 100 GB/s
    rc, out = _simulate(capsys, tmp_path / "link.json", *two, "--intra-alpha-us", "0")
    assert rc == 0 and round(out["step_ms"], 8) == round(2 * B / 2 / 100e9 * 1e3 + ACROSS_MS, 8)


def test_the_cli_refuses_another_gpus_per_node_in_one_line(tmp_path, capsys):
    save_json(tmp_path / "link.json", link_to_json(WORLD, LEVELS))
    rc, err = _simulate(capsys, tmp_path / "link.json", "--nodes", "1", "--gpus-per-node", "4")
    assert rc == 2 and err.count("\n") == 1
    # the flag and its bad value, the link file, and the value it was calibrated at
    words = err.replace(",", " ").split()
    assert [words[i + 1] for i, w in enumerate(words) if w == "--gpus-per-node"] == ["4:", "2"]
    assert "link.json" in err and "--intra-link" in err


def test_the_sweep_says_which_link_the_inter_phase_ran_on(tmp_path, capsys):
    save_json(tmp_path / "link.json", link_to_json(WORLD, LEVELS))
    assert main(["sweep", "--model", "mlp-4x1024", "--link", str(tmp_path / "link.json"),
                 "--nodes", "2", "--gpus-per-node", "2", "--bucket-mb", "4",
                 "--strategies", "bucketed,hierarchical", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    topo = doc["setup"]["topology"]
    assert (topo["intra_link"], topo["hierarchical_inter_link"]) == ("ring-p4-intra",
                                                                      "ring-p4-inter")
    (hier,) = [r for r in doc["rows"] if r["strategy"] == "hierarchical"]
    assert hier["step_ms_range"][1] > hier["step_ms"]   # the range moves it (below)
    assert topo["hierarchical_inter_busbw_gbps"] == 0.5
    assert main(["sweep", "--model", "mlp-4x1024", "--link", str(tmp_path / "link.json"),
                 "--nodes", "2", "--gpus-per-node", "2", "--bucket-mb", "4",
                 "--strategies", "bucketed,hierarchical"]) == 0
    # the text names the same link, with its α and busbw
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "ring-p4-inter" in x]
    assert "1000" in line.split() and "0.5" in line.split()


def test_a_range_scales_the_levels_inter_link_and_holds_the_intra_one():
    """A link between nodes spread x0.5-x2 (calibrate's time_spread): the hierarchical
    inter-node phase on the levels' inter link moves with it, as it did on --link."""
    from simddp.predict.predictor import Predictor
    from simddp.predict.scenarios import scenario_set
    spread = dataclasses.replace(WORLD, time_spread=(0.5, 2.0))
    point = resolve(ZERO, spread, 4, topology=LEVELS.topology(2, 2))
    r = Predictor(scenario_set(point, ranges=True)).predict(make_strategy("hierarchical", 1000))
    assert {k: ms(v) for k, v in r.scenarios_s.items() if k in ("low", "high")} == {
        "low": round(RS_MS + ACROSS_MS / 2 + AG_MS, 8),
        "high": round(RS_MS + 2 * ACROSS_MS + AG_MS, 8)}
    topo = LEVELS.topology(2, 2)
    assert topo.time_scaled(1.0) is topo and Topology(2, 2, INTRA).time_scaled(2.0).inter is None
    slow = topo.time_scaled(2.0)
    assert (slow.intra, slow.inter.alpha_s, slow.inter.busbw_gbps) == (INTRA, 2e-3, 0.25)
    assert ms(collective_s(slow, WORLD, "all_reduce", B, "hierarchical")) == round(
        RS_MS + 2 * ACROSS_MS + AG_MS, 8)

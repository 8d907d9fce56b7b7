"""Two-level clusters (issue 22): the laws against hand-computed numbers, and the reductions
to one link."""
from __future__ import annotations

import pytest

from simddp import (Layer, Link, LinkFile, ModelProfile, build_profile, make_strategy,
                    parse_model, plan, resolve)
from simddp.sim.engine import simulate
from simddp.cost.hierarchical import LevelHosts
from simddp.errors import InputError
from simddp.inputs.gloo_host import GlooHost
from simddp.presets import get_link
from simddp.cost.hierarchical import collective_s
from simddp.inputs.topology import Topology

MIB4 = 4 * 2**20
B = 4 * MIB4        # mlp-4x1024's gradients: 16,777,216 bytes
ZERO = ModelProfile("mlp-4x1024, no compute", tuple(Layer(f"l{i}", (MIB4,)) for i in range(4)))


def ms(result) -> float:
    return round(result.step_s * 1e3, 6)


def run(profile, link, p, world_size, topology=None, record=True):
    """The engine on ``link`` (the link between nodes, with ``topology``), without
    contention: the laws alone."""
    inputs = resolve(profile, link, world_size, topology=topology, contention="none")
    return simulate(p, inputs, record=record)


def test_the_issues_2x2_case_flat_ring_and_hierarchical():
    """α 0, 1 GB/s between nodes, 100 GB/s inside: ring 2·(3/4)·B/1 GB/s; hierarchical
    (1/2)·B/100 + 2·(1/2)·(B/2)/1 + (1/2)·B/100 GB/s."""
    topo = Topology(2, 2, Link("nvlink", 0.0, 100.0))
    inter = Link("eth", 0.0, 1.0)
    flat = run(ZERO, inter, plan(ZERO, make_strategy("flat")), 4, topology=topo)
    hier = run(ZERO, inter, plan(ZERO, make_strategy("hierarchical", 1000)), 4, topology=topo)
    assert ms(flat) == round(2 * 0.75 * B / 1e9 * 1e3, 6) == 25.165824
    assert ms(hier) == round((0.5 * B / 100e9 + 2 * 0.5 * (B / 2) / 1e9 + 0.5 * B / 100e9)
                             * 1e3, 6) == 8.55638


def test_each_hierarchical_phase_pays_the_wait_of_a_blocking_link():
    # the 2x2 case with a calibrated link between nodes: α 0, blocking α 1 ms, so each of
    # the three phases, waited for before the next on realrun's worker thread, adds 1 ms
    topo = Topology(2, 2, Link("nvlink", 0.0, 100.0))
    waits = LinkFile(Link("eth", 0.0, 1.0), host=GlooHost(blocking_alpha_s=1e-3))
    hosts = LevelHosts(inter=waits.host)
    hier = run(ZERO, waits, plan(ZERO, make_strategy("hierarchical", 1000)), 4, topology=topo)
    flat = run(ZERO, waits, plan(ZERO, make_strategy("flat")), 4, topology=topo)
    assert ms(hier) == 8.55638 + 3.0
    assert ms(flat) == 25.165824 + 1.0     # flat waits for its one all-reduce: blocking α
    assert collective_s(topo, waits.link, "reduce_scatter", B, "hierarchical",
                        hosts=hosts) == pytest.approx((0.5 * B / 100e9 + 0.5 * (B / 2) / 1e9)
                                                      + 2e-3)
    # a plan that waits anyway pays the links' own blocking α, not the wait again
    assert collective_s(topo, waits.link, "all_reduce", B, "hierarchical", blocking=True,
                        hosts=hosts) == pytest.approx(8.55638e-3 + 1e-3)


def test_4x8_laws_by_hand():
    """4 nodes × 8 GPUs; inside α 10 µs, 100 GB/s; between α 50 µs, 10 GB/s."""
    topo = Topology(4, 8, Link("in", 10e-6, 100.0))
    inter = Link("ib", 50e-6, 10.0)
    us = lambda kind, algo: round(collective_s(topo, inter, kind, B, algo) * 1e6, 5)  # noqa: E731
    # one ring over 32 ranks, paced by its inter-node hops: 50 + 2·31/32·B/10 GB/s
    assert us("all_reduce", "ring") == 3300.5856
    # RS in the node 10 + 7/8·B/100 GB/s = 156.80064; AR of B/8 over 4 nodes
    # 50 + 2·3/4·(B/8)/10 GB/s = 364.5728; AG as the RS
    assert us("all_reduce", "hierarchical") == round(2 * 156.80064 + 364.5728, 5) == 678.17408
    # FSDP's reduce-scatter: RS in the node, then RS of B/8 over 4 nodes 50 + 3/4·(B/8)/10 GB/s
    assert us("reduce_scatter", "hierarchical") == round(156.80064 + 207.2864, 5)
    assert us("all_gather", "hierarchical") == round(207.2864 + 156.80064, 5)
    assert topo.inter_bytes("all_reduce", B, "hierarchical") == 2 * 3 / 4 * B / 8
    assert topo.inter_bytes("all_reduce", B, "ring") == 2 * 31 / 32 * B


def test_hierarchical_buckets_overlap_backward_by_hand():
    """2 layers (fwd 1 ms, bwd 2 ms, 4 MiB each), one bucket per layer, 2×2, α 0: each
    all-reduce takes 2·(1/2)·2 MiB/1 GB/s + 2·(1/2)·4 MiB/100 GB/s = 2.13909504 ms."""
    toy = ModelProfile("toy", tuple(Layer(f"l{i}", (MIB4,), 0.001, 0.002) for i in range(2)))
    topo = Topology(2, 2, Link("nvlink", 0.0, 100.0))
    r = run(toy, Link("eth", 0.0, 1.0), plan(toy, make_strategy("hierarchical", 4)), 4,
            topology=topo)
    comm = [(round(s.start_s * 1e3, 8), round(s.end_s * 1e3, 8)) for s in r.spans
            if s.lane == "comm"]
    # l1's bucket at 4 ms (its backward ends), l0's after both l0's backward (6 ms) and l1's
    # bucket (6.13909504 ms)
    assert comm == [(4.0, 6.13909504), (6.13909504, 8.27819008)]
    assert ms(r) == 8.27819


@pytest.mark.parametrize("name", ["naive", "overlap", "bucketed", "ddp", "hierarchical", "fsdp",
                                  "zero2", "ddp+fp16"])
def test_one_node_or_one_gpu_per_node_is_one_link(name):
    profile = build_profile(parse_model("transformer-small"))
    nvlink, eth = get_link("nvlink-a100"), get_link("eth-100g")
    p = plan(profile, make_strategy(name, 25))
    one_node = run(profile, eth, p, 8, topology=Topology(1, 8, nvlink), record=False)
    assert one_node.step_s == run(profile, nvlink, p, 8, record=False).step_s
    spread = run(profile, eth, p, 8, topology=Topology(8, 1, nvlink), record=False)
    assert spread.step_s == run(profile, eth, p, 8, record=False).step_s


def test_bad_topology_is_one_line():
    with pytest.raises(InputError, match="--gpus-per-node must be an integer >= 1"):
        Topology(2, 0, Link("x", 0.0, 1.0))
    with pytest.raises(InputError, match="world size 4 is not 2 nodes × 4 GPUs"):
        run(ZERO, Link("x", 0.0, 1.0), plan(ZERO, make_strategy("flat")), 4,
            topology=Topology(2, 4, Link("y", 0.0, 1.0)))


def test_simulate_cli_takes_a_two_level_cluster(capsys):
    from simddp.cli.main import main
    base = ["simulate", "--strategy", "hierarchical", "--bucket-mb", "1000", "--model",
            "mlp-4x1024", "--forward-ms", "0", "--backward-ms", "0", "--optimizer-ms", "0",
            "--link", "eth-100g", "--alpha-us", "0", "--busbw-gbps", "1", "--format", "json"]
    two_level = ["--nodes", "2", "--gpus-per-node", "2", "--intra-link", "nvlink-a100",
                 "--intra-alpha-us", "0", "--intra-busbw-gbps", "100"]
    assert main(base + two_level) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    assert round(out["step_ms"], 5) == 8.55638 and out["world_size"] == 4
    for bad, message in ((["--nodes", "2"], "--nodes and --gpus-per-node go together"),
                         (two_level + ["--world-size", "8"], "--world-size 8 is not --nodes 2"),
                         (["--intra-link", "nvlink-a100"], "--intra-link: describe the cluster"),
                         (["--nodes", "2", "--gpus-per-node", "2", "--device", "t4"],
                          "no NVLink preset for --device t4")):
        assert main(base + bad) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_sweep_on_two_levels_adds_hierarchical_and_says_which_level_bounds(capsys):
    from simddp.cli.main import main
    argv = ["sweep", "--nodes", "4", "--gpus-per-node", "8", "--link", "ib-hdr",
            "--bucket-mb", "5,25", "--format", "json"]
    assert main(argv) == 0
    doc = __import__("json").loads(capsys.readouterr().out)
    assert {r["strategy"] for r in doc["rows"]} >= {"ddp", "hierarchical"}
    topo = doc["setup"]["topology"]
    assert (topo["nodes"], topo["gpus_per_node"], topo["intra_link"]) == (4, 8, "nvlink-a100")
    ddp, hier = topo["levels"]
    assert ddp["strategy"] == "ddp" and ddp["bound_by"] == "inter" and ddp["intra_node_ms"] == 0
    # the hierarchical all-reduce sends 1/G of the ring's share across nodes: 2·3/4/8 vs 2·31/32
    assert hier["inter_node_bytes"] / ddp["inter_node_bytes"] == pytest.approx(
        (2 * 3 / 4 / 8) / (2 * 31 / 32))


def test_sweep_on_one_node_is_the_single_link_sweep(capsys):
    from simddp.cli.main import main
    common = ["sweep", "--bucket-mb", "5,25", "--format", "json", "--strategies", "naive,ddp"]
    assert main(common + ["--link", "nvlink-a100", "--world-size", "8"]) == 0
    single = __import__("json").loads(capsys.readouterr().out)
    assert main(common + ["--nodes", "1", "--gpus-per-node", "8"]) == 0
    nested = __import__("json").loads(capsys.readouterr().out)
    assert nested["rows"] == single["rows"]


def test_account_says_what_crosses_each_level(capsys):
    from simddp.cli.main import main
    assert main(["account", "--nodes", "4", "--gpus-per-node", "8", "--link", "ib-hdr",
                 "--format", "json"]) == 0
    levels = {r["strategy"]: r for r in
              __import__("json").loads(capsys.readouterr().out)["communication"]["levels"]}
    assert levels["ddp"]["bound_by"] == "inter" and levels["ddp"]["intra_node_ms"] == 0
    assert levels["hierarchical"]["inter_node_bytes"] == pytest.approx(
        levels["ddp"]["inter_node_bytes"] * (2 * 3 / 4 / 8) / (2 * 31 / 32))
    assert main(["account", "--nodes", "4", "--gpus-per-node", "8", "--link", "ib-hdr"]) == 0
    assert "inter-node" in capsys.readouterr().out

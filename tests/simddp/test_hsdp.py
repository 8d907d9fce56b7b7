"""fsdp, zero2 and hsdp on two levels (issue 62 item 4), against numbers worked by hand.

The cluster: 2 nodes × 4 GPUs (p = 8, N = 2, G = 4). Inside a node α 10 µs, busbw 100 GB/s;
between nodes α 50 µs, busbw 10 GB/s. The model: 3 layers l0, l1, l2, one 40,000,000-byte
gradient each (n), forward 1 ms, backward 2 ms, an optimizer of 4 ms over all parameters.
No contention, no host costs: the laws and the plans alone. One layer per unit.

The calls (simddp/cost/hierarchical.py; n the unit's bytes):

- fsdp, zero2: rings over all 8 ranks, paced by the link between nodes. An all-gather or a
  reduce-scatter sends 7/8·n = 35 MB a rank over it: 50 µs + 35 MB / 10 GB/s = 3.55 ms.
- hsdp: all-gathers and reduce-scatters among a node's 4 ranks, 3/4·n = 30 MB a rank on the
  intra link: 10 µs + 30 MB / 100 GB/s = 0.31 ms; after each reduce-scatter an all-reduce of
  the 10 MB shard between the 2 nodes, 2·(1/2)·10 MB = 10 MB a rank:
  50 µs + 10 MB / 10 GB/s = 1.05 ms.
"""
from __future__ import annotations

import json

import pytest

from simddp import Layer, Link, ModelProfile, make_strategy, plan, resolve
from simddp.cost.hierarchical import ACROSS, NODE, WORLD, group_s
from simddp.errors import InputError
from simddp.inputs.topology import Topology, level_load
from simddp.planning.strategy import Strategy
from simddp.sim.engine import simulate

N_BYTES = 40_000_000
TOY = ModelProfile("3 x 40 MB", tuple(Layer(f"l{i}", (N_BYTES,), 1e-3, 2e-3)
                                      for i in range(3)), optimizer_s=4e-3)
TOPO = Topology(2, 4, Link("nvlink", 10e-6, 100.0))
INTER = Link("ib", 50e-6, 10.0)
RING_MS, NODE_MS, ACROSS_MS = 3.55, 0.31, 1.05


def run(name: str, topology: Topology | None = TOPO, profile: ModelProfile = TOY):
    inputs = resolve(profile, INTER, 8, topology=topology, contention="none")
    return simulate(plan(profile, make_strategy(name)), inputs)


def rounded(x: float, places: int = 9) -> float:
    return round(x, places)


def spans_ms(result) -> list[tuple[str, str, float, float]]:
    return [(s.lane, s.label, round(s.start_s * 1e3, 6), round(s.end_s * 1e3, 6))
            for s in result.spans]


def test_one_call_of_each_kind_on_each_group_by_hand():
    assert rounded(group_s(TOPO, INTER, "all_gather", N_BYTES, WORLD) * 1e3) == RING_MS
    assert rounded(group_s(TOPO, INTER, "reduce_scatter", N_BYTES, WORLD) * 1e3) == RING_MS
    assert rounded(group_s(TOPO, INTER, "all_gather", N_BYTES, NODE) * 1e3) == NODE_MS
    assert rounded(group_s(TOPO, INTER, "reduce_scatter", N_BYTES, NODE) * 1e3) == NODE_MS
    assert rounded(group_s(TOPO, INTER, "all_reduce", N_BYTES, ACROSS) * 1e3) == ACROSS_MS
    with pytest.raises(InputError, match="'pod'"):
        group_s(TOPO, INTER, "all_reduce", N_BYTES, "pod")


def test_per_level_bytes_and_seconds_of_one_step_by_hand():
    """Per rank and step, each call run alone. fsdp: 3 all-gathers, 3 re-gathers and 3
    reduce-scatters, every one on the link between nodes; zero2 no re-gathers; hsdp the same
    9 calls inside the node and 3 all-reduces between nodes."""
    def load(name: str) -> dict:
        out = level_load(TOPO, INTER, plan(TOY, make_strategy(name)))
        return {"inter_bytes": out["inter_node_bytes"], "intra_bytes": out["intra_node_bytes"],
                "inter_ms": rounded(out["inter_node_s"] * 1e3),
                "intra_ms": rounded(out["intra_node_s"] * 1e3), "bound_by": out["bound_by"]}

    assert load("fsdp") == {"inter_bytes": 9 * 35e6, "intra_bytes": 0.0,
                            "inter_ms": 9 * RING_MS, "intra_ms": 0.0, "bound_by": "inter"}
    assert load("zero2") == {"inter_bytes": 6 * 35e6, "intra_bytes": 0.0,
                             "inter_ms": rounded(6 * RING_MS), "intra_ms": 0.0,
                             "bound_by": "inter"}
    assert load("hsdp") == {"inter_bytes": 3 * 10e6, "intra_bytes": 9 * 30e6,
                            "inter_ms": rounded(3 * ACROSS_MS), "intra_ms": rounded(9 * NODE_MS),
                            "bound_by": "inter"}     # 3.15 ms between nodes, 2.79 ms inside


HSDP_TIMELINE = [
    # forward: reaching l0 issues its all-gather and l1's (one ahead); l0 waits for its own
    ("comm", "l0 all-gather", 0.0, 0.31),
    ("comm", "l1 all-gather", 0.31, 0.62),
    ("compute", "l0 fwd", 0.31, 1.31),
    ("comm", "l2 all-gather", 1.31, 1.62),       # issued on reaching l1
    ("compute", "l1 fwd", 1.31, 2.31),
    ("compute", "l2 fwd", 2.31, 3.31),
    # backward: resharded after forward, l2 waits for its re-gather; l1's is prefetched
    ("comm", "l2 re-gather", 3.31, 3.62),
    ("comm", "l1 re-gather", 3.62, 3.93),
    ("compute", "l2 bwd", 3.62, 5.62),
    ("comm", "l2 reduce-scatter", 5.62, 5.93),   # inside the node
    ("comm", "l2 all-reduce", 5.93, 6.98),       # the shard across nodes, right after
    ("comm", "l0 re-gather", 6.98, 7.29),        # issued at 5.62, queued behind them
    ("compute", "l1 bwd", 5.62, 7.62),
    ("comm", "l1 reduce-scatter", 7.62, 7.93),
    ("comm", "l1 all-reduce", 7.93, 8.98),
    ("compute", "l0 bwd", 7.62, 9.62),           # its re-gather was done at 7.29
    ("comm", "l0 reduce-scatter", 9.62, 9.93),
    ("comm", "l0 all-reduce", 9.93, 10.98),
    ("compute", "optimizer", 10.98, 11.98),      # 4 ms over a node's G = 4 ranks: 1 ms
]


def test_hsdp_step_on_2x4_by_hand():
    r = run("hsdp")
    assert spans_ms(r) == HSDP_TIMELINE
    assert r.step_ms == pytest.approx(11.98) and r.collectives == 12
    assert r.compute_s == pytest.approx(10e-3)          # 9 ms of layers + 1 ms optimizer
    assert r.exposed_comm_s == pytest.approx(1.98e-3)
    assert [s.kind for s in r.spans if s.label.endswith("all-reduce")] == ["all-reduce"] * 3


def test_fsdp_and_zero2_steps_on_2x4_by_hand():
    """Every call 3.55 ms on the link between nodes; the optimizer's 4 ms over all 8 ranks.
    fsdp: AG0 0–3.55, AG1 –7.10 (l0 fwd 3.55–4.55), AG2 –10.65 (l1 7.10–8.10,
    l2 10.65–11.65); backward: AG'2 –15.20, AG'1 –18.75 (l2 bwd 15.20–17.20), RS2 –22.30, AG'0 –25.85
    (l1 18.75–20.75, l0 25.85–27.85), RS1 –29.40, RS0 –32.95; + 0.5 ms optimizer.
    zero2: the same forward, backward 11.65–17.65 unwaited, RS2 13.65–17.20, RS1 –20.75,
    RS0 –24.30; + 0.5 ms."""
    fsdp, zero2 = run("fsdp"), run("zero2")
    assert round(fsdp.step_ms, 6) == 33.45 and round(zero2.step_ms, 6) == 24.8
    assert [end for lane, label, _, end in spans_ms(fsdp) if lane == "comm"] == [
        3.55, 7.1, 10.65, 15.2, 18.75, 22.3, 25.85, 29.4, 32.95]
    assert fsdp.compute_s == pytest.approx(9.5e-3)       # 9 ms + 4 ms / 8
    # hsdp beside them: 2.8× faster than fsdp on this cluster
    assert run("hsdp").step_ms < zero2.step_ms < fsdp.step_ms


def test_hsdp_plan_shards_in_the_node_and_all_reduces_across():
    p = plan(TOY, make_strategy("hsdp"))
    assert p.strategy.hybrid and p.strategy.reshard_after_forward is True
    assert p.strategy.implementation == "fsdp" and p.shards_optimizer
    rows = [(c.label, c.kind, c.group, c.nbytes, c.ready_at, c.ready_layer, c.gates)
            for c in p.collectives]
    fsdp = [(c.label, c.kind, c.nbytes, c.ready_at, c.ready_layer, c.gates)
            for c in plan(TOY, make_strategy("fsdp")).collectives]
    # fsdp's calls, in the node, each reduce-scatter followed by its all-reduce across nodes
    assert [r for r in rows if r[2] == NODE] == [(*f[:2], NODE, *f[2:]) for f in fsdp]
    assert [r for r in rows if r[2] == ACROSS] == [
        (f"l{u} all-reduce", "all_reduce", ACROSS, N_BYTES, "after_backward", u, None)
        for u in (2, 1, 0)]
    reduce = [(label, group) for label, _, group, *_ in rows if "re-" not in label
              and "gather" not in label]
    assert reduce == [("l2 reduce-scatter", NODE), ("l2 all-reduce", ACROSS),
                      ("l1 reduce-scatter", NODE), ("l1 all-reduce", ACROSS),
                      ("l0 reduce-scatter", NODE), ("l0 all-reduce", ACROSS)]
    assert {c.group for c in plan(TOY, make_strategy("fsdp")).collectives} == {WORLD}


def test_hsdp_on_one_node_is_fsdp_and_one_gpu_a_node_is_replication():
    # no topology: every rank is one node; the all-reduces across nodes have one rank each
    one_link = run("hsdp", topology=None)
    assert one_link.step_s == run("fsdp", topology=None).step_s
    assert {s.end_s - s.start_s for s in one_link.spans if s.label.endswith("all-reduce")} \
        == {0.0}
    # one node of 8: fsdp on the intra link alone
    nvlink = Link("nvlink", 10e-6, 100.0)
    one_node = run("hsdp", topology=Topology(1, 8, nvlink))
    assert one_node.step_s == simulate(plan(TOY, make_strategy("fsdp")), resolve(
        TOY, nvlink, 8, contention="none")).step_s
    # 8 nodes × 1 GPU: nothing to shard (gathers and scatters of one rank take 0 s); each
    # unit's whole gradient all-reduced over 8 nodes, 50 µs + 2·7/8·40 MB / 10 GB/s = 7.05 ms
    spread = run("hsdp", topology=Topology(8, 1, nvlink))
    comm = {label: round((end - start), 6) for lane, label, start, end in spans_ms(spread)
            if lane == "comm"}
    assert comm["l2 all-gather"] == comm["l2 reduce-scatter"] == 0.0
    assert comm["l2 all-reduce"] == 7.05


def test_hybrid_is_for_sharded_strategies_only():
    with pytest.raises(InputError, match="hybrid"):
        Strategy("x", "bucket", True, bucket_bytes=1, first_bucket_bytes=1, hybrid=True)
    assert Strategy.from_dict(make_strategy("hsdp").to_dict()) == make_strategy("hsdp")


def test_account_prints_hsdp_per_level_and_its_states(capsys):
    """mlp-4x1024 (4 units of 4 MiB, B = 16 MiB) on 2 × 4, α 0, 1 GB/s between nodes and
    100 GB/s inside: hsdp sends 2·(1/2)·B/4 = 4 MiB across nodes (4.194 ms) and
    3·(3/4)·B = 36 MiB inside (0.377 ms); its shards are 1/4 of the model, fsdp's 1/8."""
    from simddp.cli.main import main
    assert main(["account", "--model", "mlp-4x1024", "--nodes", "2", "--gpus-per-node", "4",
                 "--link", "eth-100g", "--alpha-us", "0", "--busbw-gbps", "1",
                 "--intra-link", "nvlink-a100", "--intra-alpha-us", "0",
                 "--intra-busbw-gbps", "100", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    levels = {r["strategy"]: r for r in doc["communication"]["levels"]}
    b = 16 * 2**20
    assert levels["hsdp"]["inter_node_bytes"] == b / 4
    assert levels["hsdp"]["intra_node_bytes"] == 3 * 3 / 4 * b
    assert levels["hsdp"]["inter_node_ms"] == pytest.approx(b / 4 / 1e6)
    assert levels["hsdp"]["intra_node_ms"] == pytest.approx(3 * 3 / 4 * b / 100e6)
    assert levels["fsdp"]["inter_node_bytes"] == 3 * 7 / 8 * b     # rings over all 8
    states = {s["strategy"]: s for s in doc["states"]}
    assert states["hsdp"]["params"] == b // 4 and states["fsdp"]["params"] == b // 8

"""Comm hooks (fp16, bf16, PowerSGD) on hand-computed plans and timelines.

The toy of test_engine.py (3 layers, 1 ms forward, 2 ms backward, one 1 MiB gradient each, 2
ranks, 1 MiB all-reduced in 1 ms). ddp at 2 MB puts tensor 2 alone in bucket0 (ready after
l2) and tensors 1, 0 in bucket1 (ready after l0). Host costs, when charged: torch's, copying
1 MiB in 0.25 ms (copy_gbps = 4 MiB/ms).
"""
from __future__ import annotations

import pytest

from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.planning.hooks import CommHook, hook_cost, matrix_view, parse_comm_hook, powersgd_split
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.link import Link
from simddp.planning.plans import plan
from simddp.planning.strategy import MB, make_strategy
from simddp.predict.resolve import resolve
from tests.simddp.test_engine import COMPUTE_LANE, TOY, step_ms, timeline, unit_link

QUARTER_MS_PER_MIB = Host("box", {"torch": HostCosts(copy_gbps=4 * MB / 1e6)})


def run(name: str, host: Host | None = None, link: Link | None = None, **kw):
    return simulate(plan(TOY, make_strategy(name, **kw)),
                    resolve(TOY, link or unit_link(), 2, host=host))


def test_fp16_halves_every_all_reduce():
    # bucket0 (1 MiB -> 0.5 MiB on the wire) 5–5.5; bucket1 (2 MiB -> 1 MiB) 9–10. Plain ddp
    # at 2 MB ends at 11 (test_engine.py): 1 ms saved, the last bucket's half.
    r = run("ddp+fp16", bucket_mb=2)
    assert timeline(r) == COMPUTE_LANE + [("comm", "bucket0", 5.0, 5.5),
                                          ("comm", "bucket1", 9.0, 10.0)]
    assert step_ms(r) == 10.0 and r.strategy == "ddp+fp16" and r.bucket_mb == 2.0
    assert timeline(run("ddp+bf16", bucket_mb=2)) == timeline(r)


def test_fp16_casts_are_charged_at_the_host_copy_rate():
    # bucket0, one tensor, copied into its bucket as torch's reducer does (1 MiB, 0.25) + cast
    # to fp16 (0.25) at 5–5.5, all-reduce 5.5–6. bucket1: copy-in of tensor 1 after l1
    # (7.5–7.75), tensor 0 + the cast of 2 MiB after l0 (0.25 + 0.5: 9.75–10.5), all-reduce
    # 10.5–11.5; then copy out bucket0 (1 MiB back + its cast: 10.5–11.0) and bucket1 (2 MiB
    # back + 2 MiB cast: 11.5–12.5). Without the hook the step is 12.25 (below): at 4 MiB/ms
    # the casts cost more than the half they save on the wire.
    r = run("ddp+fp16", QUARTER_MS_PER_MIB, bucket_mb=2)
    assert timeline(r) == [
        ("compute", "forward", 0.0, 3.0), ("compute", "l2 bwd", 3.0, 5.0),
        ("compute", "copy-in", 5.0, 5.5), ("compute", "l1 bwd", 5.5, 7.5),
        ("compute", "copy-in", 7.5, 7.75), ("compute", "l0 bwd", 7.75, 9.75),
        ("compute", "copy-in", 9.75, 10.5), ("compute", "bucket0 copy-out", 10.5, 11.0),
        ("compute", "bucket1 copy-out", 11.5, 12.5),
        ("comm", "bucket0", 5.5, 6.0), ("comm", "bucket1", 10.5, 11.5)]
    assert step_ms(r) == 12.5
    assert step_ms(run("ddp", QUARTER_MS_PER_MIB, bucket_mb=2)) == 12.25


def test_powersgd_sends_three_all_reduces_per_bucket():
    # One 3 MiB bucket (bucketed, 25 MB), ready after l0 at 9. Each 1 MiB gradient is a
    # 512×512 matrix: P and Q are 512×1 each at rank 1 (2 KiB), nothing goes uncompressed.
    # With α = 1 ms and a bandwidth term of picoseconds, the bucket's three calls take 3 ms.
    fast = Link("alpha-only", 1e-3, 1e6)
    r = run("bucketed+powersgd:1", link=fast, bucket_mb=25)
    (c,) = plan(TOY, make_strategy("bucketed+powersgd:1", 25)).collectives
    assert c.calls == (0, 3 * 512 * 4, 3 * 512 * 4) and c.nbytes == 3 * MB
    assert timeline(r)[-1][:3] == ("comm", "bucket0", 9.0)
    assert round(step_ms(r), 6) == 12.0 and r.collectives == 3


def test_powersgd_compute_before_between_and_after():
    # The same bucket, N = C = 3 MiB: before launch error feedback + copy + P = M·Q = 9 MiB;
    # between P and Q: Q = Mᵀ·P = 3 MiB (+ orthogonalising 6 KiB of P, once at rank 1);
    # after: M = P·Qᵀ + the new error = 6 MiB.
    cost = hook_cost(CommHook("powersgd", 1), [MB, MB, MB])
    assert (cost.pre_work_bytes, cost.mid_work_bytes, cost.post_work_bytes) == \
        (9 * MB, 3 * MB + 3 * 512 * 4, 6 * MB)
    # At 4 MiB/ms: each gradient's copy-in (0.25) after its layer, tensor 0's with the 2.25
    # before launch after l0: 9.5–12. The bucket's comm: 3 α of 1 ms, and 0.75 ms + 6 KiB at
    # 4 MiB/ms between the P and Q calls, on the comm lane: 12–15.75 (and 0.0015). Then the
    # copy-out (3 MiB, 0.75) and the work after (6 MiB, 1.5).
    r = run("bucketed+powersgd:1", QUARTER_MS_PER_MIB, Link("alpha-only", 1e-3, 1e6),
            bucket_mb=25)
    between_ms = 0.75 + 3 * 512 * 4 / (4 * MB)
    assert [(s[1], round(s[2], 6), round(s[3], 6)) for s in timeline(r)] == [
        ("forward", 0.0, 3.0), ("l2 bwd", 3.0, 5.0), ("copy-in", 5.0, 5.25),
        ("l1 bwd", 5.25, 7.25), ("copy-in", 7.25, 7.5), ("l0 bwd", 7.5, 9.5),
        ("copy-in", 9.5, 12.0),
        ("bucket0 copy-out", round(15.0 + between_ms, 6), round(17.25 + between_ms, 6)),
        ("bucket0", 12.0, round(15.0 + between_ms, 6))]


def test_fp16_plan_fields_an_executor_reads():
    p = plan(TOY, make_strategy("bucketed", 2, comm_hook="fp16"))
    assert p.strategy.name == "bucketed+fp16" and p.strategy.implementation == "torch"
    assert p.strategy.comm_hook == CommHook("fp16")
    assert [(c.tensor_ids, c.nbytes, c.calls) for c in p.collectives] == [
        ((2, 1), 2 * MB, (MB,)), ((0,), MB, (MB // 2,))]
    assert p.buckets == [(2, 1), (0,)] and p.calls == 2


def test_powersgd_leaves_what_does_not_compress_uncompressed():
    # 10 elements: a 3×4 view, (3 + 4)·1·2 = 14 ≥ 12: sent as is. 1 MiB: 512×512, compressed.
    assert matrix_view(10) == (3, 4)
    assert powersgd_split(1, [40, MB]) == (40, MB, 512 * 4, 512 * 4)
    assert powersgd_split(4, [MB]) == (0, MB, 512 * 16, 512 * 16)


@pytest.mark.parametrize("text, hook", [
    ("fp16", CommHook("fp16")), ("bf16", CommHook("bf16", 0, 0)),
    ("powersgd:2", CommHook("powersgd", 2, 1000)), ("powersgd:1:10", CommHook("powersgd", 1, 10))])
def test_hook_names_round_trip(text, hook):
    assert parse_comm_hook(text) == hook and hook.name == text.replace(":1000", "")


@pytest.mark.parametrize("text, match", [
    ("int8", "unknown 'int8'; choose fp16, bf16 or powersgd:R"),
    ("powersgd:0", "powersgd rank must be an integer >= 1, got 0"),
    ("powersgd:x", "powersgd takes an integer rank >= 1"),
    ("powersgd:2:1", "start step must be an integer >= 2, got 1"),
    ("powersgd", "powersgd rank must be an integer >= 1, got 0")])
def test_bad_hooks_are_one_line_input_errors(text, match):
    with pytest.raises(InputError, match=match) as e:
        parse_comm_hook(text)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["flat", "naive", "overlap", "no_sync", "fsdp", "zero2"])
def test_only_ddp_and_bucketed_take_a_hook(name):
    with pytest.raises(InputError, match=f"works with bucketed and ddp .*not {name}"):
        make_strategy(name, 25, comm_hook="fp16")
    with pytest.raises(InputError, match="works with bucketed and ddp"):
        make_strategy(f"{name}+fp16", 25)

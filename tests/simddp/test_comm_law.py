"""The small-collective law (issue 19), hand-checked on round numbers.

A collective that a step overlaps costs on the comm lane what it costs alone, α + b·n/busbw
with α the link's ``alpha_s`` (calibrate: the small sizes' lone α); queued ones complete one
after another at that cost, whatever sits in front of them. Blocking plans pay
``blocking_alpha_s`` instead. docs/results/2026-11-25-small-collective-law.md has the
measurements behind it.
"""
import dataclasses
import json

import pytest

from simddp import (Layer, Link, LinkFile, ModelProfile, closed_form_step_s, make_strategy, plan,
                    simulate)
from simddp.cost.hierarchical import LevelHosts
from simddp.sim.comm import comm_seconds
from simddp.inputs.contention import Contention
from simddp.inputs.gloo_host import GlooHost
from simddp.cli.main import main
from simddp.inputs.host import Host
from simddp.errors import InputError
from simddp.inputs.io import link_file_from_json, link_to_json, profile_to_json
from simddp.rig.gloo_shared_cpu import split_comm

# l1: one 1 MB gradient; l0: four of 1 kB. Forward and backward 1 ms per layer.
TOY = ModelProfile("toy", (Layer("l0", (1000,) * 4, 0.001, 0.001),
                           Layer("l1", (1_000_000,), 0.001, 0.001)))
LINK = LinkFile(Link("l", alpha_s=100e-6, busbw_gbps=1.0),  # 1 GB/s, p = 2
                host=GlooHost(blocking_alpha_s=300e-6))


def comm_spans(result):
    return [(round(s.start_s * 1e3, 6), round(s.end_s * 1e3, 6))
            for s in result.spans if s.lane == "comm"]


def test_small_ones_queued_behind_a_large_one_each_cost_their_lone_time():
    # forward 0-2 ms; l1's backward 2-3 ms, its 1 MB all-reduce 3 -> 3 + 0.1 + 1.0 = 4.1 ms;
    # l0's backward 3-4 ms, its four 1 kB all-reduces wait for the lane, then 0.101 ms each
    r = simulate(TOY, LINK, plan(TOY, make_strategy("overlap")), world_size=2)
    assert comm_spans(r) == [(3.0, 4.1), (4.1, 4.201), (4.201, 4.302), (4.302, 4.403),
                             (4.403, 4.504)]
    assert r.step_s == pytest.approx(4.504e-3)


def test_blocking_plans_pay_the_blocking_alpha():
    # naive: after the backward (4 ms) each all-reduce is waited for: 0.3 ms of α each
    r = simulate(TOY, LINK, plan(TOY, make_strategy("naive")), world_size=2)
    seconds = comm_seconds(plan(TOY, make_strategy("naive")), LINK.link, 2,
                           hosts=LevelHosts(inter=LINK.host))
    assert sorted(round(s * 1e3, 6) for s in seconds) == [0.301] * 4 + [1.3]
    assert r.step_s == pytest.approx((4.0 + 4 * 0.301 + 1.3) * 1e-3)


def test_the_step_grows_by_one_lone_alpha_per_extra_collective():
    # the same 4 kB in 4 all-reduces (overlap) or in 1 (a 0.01 MB bucket): after the large
    # one, the small ones add 4 x 0.101 ms when issued alone and 0.104 ms when bucketed
    alone = simulate(TOY, LINK, plan(TOY, make_strategy("overlap")), world_size=2).step_s
    bucketed = simulate(TOY, LINK, plan(TOY, make_strategy("bucketed", 0.01)),
                        world_size=2).step_s
    assert alone - bucketed == pytest.approx(3 * 100e-6, abs=1e-9)


# Contention split into a collective's α part and its bytes part
# (simddp.rig.gloo_shared_cpu.split_comm):
# l0 has one 1 MB gradient, l1 one 3 MB; forward 1 ms and backward 4 ms per layer; α 2 ms,
# 1 GB/s. The model measured comm x2.0 on its stream (2 + 1 and 2 + 3 ms: α 4 ms, bytes 4 ms);
# the link (calibrate's bytes-dominated stream) x1.0, so the α part's factor is
# (2.0 x 8 - 1.0 x 4) / 4 = 3.0.
SPLIT_TOY = ModelProfile("split", (Layer("l0", (10**6,), 0.001, 0.004),
                                   Layer("l1", (3 * 10**6,), 0.001, 0.004)))
MODEL = Host("h", contention=(1.0, 2.0))


def calibrated(link: Link, compute: float, comm: float) -> LinkFile:
    """``link`` as calibrate measured it on a Gloo CPU host: its contention, and the (here
    empty) ``gloo_host`` section whose links split a model's contention."""
    return LinkFile(link, Contention(compute, comm, source="link"), GlooHost())


def test_contention_slows_a_collectives_alpha_and_bytes_apart():
    link = calibrated(Link("l", alpha_s=0.002, busbw_gbps=1.0), compute=1.2, comm=1.0)
    r = simulate(SPLIT_TOY, link, plan(SPLIT_TOY, make_strategy("overlap")), 2, host=MODEL)
    # forward 0-2 ms; l1's backward 2-6 ms; its all-reduce (2 ms α at x3 + 3 ms bytes at x1:
    # x9/5 while l0's backward runs 6-10 ms) does 4 / 1.8 ms of its 5 by 10 ms, the rest at
    # full speed; l0's 3 ms all-reduce after it, alone
    end_l1 = 10 + (5 - 4 / 1.8)
    assert comm_spans(r) == [(6.0, round(end_l1, 6)), (round(end_l1, 6), round(end_l1 + 3, 6))]


def test_without_the_links_factor_the_models_slows_the_whole_collective():
    link = Link("l", alpha_s=0.002, busbw_gbps=1.0)            # a preset: nothing measured
    r = simulate(SPLIT_TOY, link, plan(SPLIT_TOY, make_strategy("overlap")), 2, host=MODEL)
    assert comm_spans(r) == [(6.0, 13.0), (13.0, 16.0)]        # 4 / 2 ms of 5 by 10 ms


def test_split_only_where_the_models_stream_can_tell_it():
    # split_comm returns (the contention, comm its α part's; the bytes part's factor), or
    # (the contention as it is, None) where the split cannot be told
    def unsplit(contention, *args) -> bool:
        same, bytes_factor = split_comm(contention, *args)
        return same is contention and bytes_factor is None

    model = Contention(1.5, 2.0, source="model")
    assert split_comm(model, 1.0, 0.004, 0.004) == (Contention(1.5, 3.0, source="model"), 1.0)
    assert unsplit(model, 1.0, 0.0005, 0.0045)                # α 10 % of the stream
    # α 40 %, as the transformer's stream at 2 Gbit/s: (2.0 x 10 - 1.0 x 6) / 4 = 3.5
    assert split_comm(model, 1.0, 0.004, 0.006) == (Contention(1.5, 3.5, source="model"), 1.0)
    assert unsplit(model, None, 0.004, 0.004)                 # the link measured nothing
    assert unsplit(model, 4.0, 0.004, 0.004)                  # would need α below x1
    link = Contention(1.5, 2.0, source="link")
    assert unsplit(link, 1.0, 0.004, 0.004)                   # only the model's own stream


def test_sweep_says_and_records_the_split(tmp_path, capsys):
    model, link = tmp_path / "prof.json", tmp_path / "link.json"
    model.write_text(json.dumps(profile_to_json(SPLIT_TOY, host=MODEL)))
    link.write_text(json.dumps(link_to_json(calibrated(Link("l", 0.002, 1.0), 1.2, 1.0))))
    assert main(["sweep", "--model", str(model), "--link", str(link), "--bucket-mb", "1",
                 "--strategies", "overlap", "--out", str(tmp_path / "pred")]) == 0
    # one setup line gives the split: the α part's factor, then the bytes'
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "x3.00," in x.split()]
    assert line.split()[-4:-2] == ["x3.00,", "x1.00"]
    setup = json.loads((tmp_path / "pred" / "sweep.json").read_text())["setup"]
    assert setup["contention_split"] == {"alpha": 3.0, "bytes": 1.0}


# A shaped link's token bucket (simddp.rig.gloo_shared_cpu.TokenBucket): TOY and LINK with a 500 kB
# bucket, 0.5 ms at 1 GB/s.
SHAPED = LinkFile(Link("l", alpha_s=100e-6, busbw_gbps=1.0),
                  host=GlooHost(blocking_alpha_s=300e-6, burst_bytes=500_000))


def test_waited_for_collectives_send_what_the_bucket_holds_unshaped():
    # backward ends at 4 ms; the 1 MB all-reduce: 0.3 ms α + 1.0 ms of bytes, 0.5 of them from
    # the full bucket: 4.0 -> 4.8; each 1 kB one after it: the bucket refilled during its
    # 0.3 ms α, its bytes free: 0.3 ms each
    r = simulate(TOY, SHAPED, plan(TOY, make_strategy("naive")), world_size=2)
    assert comm_spans(r) == [(4.0, 4.8), (4.8, 5.1), (5.1, 5.4), (5.4, 5.7), (5.7, 6.0)]
    wire = simulate(TOY, LINK, plan(TOY, make_strategy("naive")), world_size=2)
    assert round(wire.step_ms, 6) == 4 + 1.3 + 4 * 0.301


def test_a_hand_off_refills_the_bucket_by_the_links_measured_refill():
    # two 1 MB all-reduces after the 4 ms backward: the first 0.3 ms α + 1.0 of bytes less
    # the full bucket's 0.5, 4.0 -> 4.8, empties it; the second refills during its hand-off:
    # by its whole α (0.3 ms) without a measured refill, 4.8 -> 5.8; by the link's 0.1 ms
    # (a call's α capped at the burst, on average), 4.8 -> 6.0
    toy = ModelProfile("toy", (Layer("l0", (1_000_000,), 0.001, 0.001),
                               Layer("l1", (1_000_000,), 0.001, 0.001)))
    naive = plan(toy, make_strategy("naive"))
    assert comm_spans(simulate(toy, SHAPED, naive, 2)) == [(4.0, 4.8), (4.8, 5.8)]
    measured = dataclasses.replace(
        SHAPED, host=dataclasses.replace(SHAPED.host, blocking_refill_s=100e-6))
    assert comm_spans(simulate(toy, measured, naive, 2)) == [(4.0, 4.8), (4.8, 6.0)]
    # a prediction range's slower end scales it with the α: the same share of a longer α
    assert measured.host.time_scaled(2.0).blocking_refill_s == pytest.approx(200e-6)
    assert link_file_from_json(link_to_json(measured)) == measured
    assert "blocking_refill_s" not in link_to_json(SHAPED)["gloo_host"]
    with pytest.raises(InputError, match="blocking_refill_s"):
        dataclasses.replace(SHAPED.host, blocking_refill_s=-1e-6)


def test_queued_collectives_refill_the_bucket_only_while_the_link_idles():
    # l1's 1 MB all-reduce at 3 ms: 0.1 + 1.0 - 0.5 (full bucket); idle 3.6 -> 4.0 refills
    # 0.4 ms; the four 1 kB ones from 4 ms take 0.1 ms each (their bytes from the bucket)
    r = simulate(TOY, SHAPED, plan(TOY, make_strategy("overlap")), world_size=2)
    assert comm_spans(r) == [(3.0, 3.6), (4.0, 4.1), (4.1, 4.2), (4.2, 4.3), (4.3, 4.4)]


def test_the_closed_form_refuses_a_shaped_link():
    with pytest.raises(ValueError, match="shaped link's bucket"):
        closed_form_step_s(TOY, SHAPED, plan(TOY, make_strategy("naive")), 2)


def test_a_kind_fitted_on_the_shaped_sweep_is_not_given_the_bucket_twice():
    # reduce-scatter's and all-gather's laws were fitted on a sweep the bucket had shaped:
    # FSDP's collectives cost what they cost on the same link without a bucket
    fits = {"reduce_scatter": {"alpha_s": 200e-6, "busbw_gbps": 0.5},
            "all_gather": {"alpha_s": 150e-6, "busbw_gbps": 0.8}}
    fsdp = plan(TOY, make_strategy("fsdp"))
    shaped = simulate(TOY, LinkFile(Link("l", 100e-6, 1.0, kind_fits=fits),
                                    host=GlooHost(burst_bytes=500_000)), fsdp, 2)
    wire = simulate(TOY, Link("l", 100e-6, 1.0, kind_fits=fits), fsdp, 2)
    assert comm_spans(shaped) == comm_spans(wire) and len(comm_spans(wire)) >= 2

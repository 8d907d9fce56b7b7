"""The blocking α on a shaped link, calibrate's and validate's probes': the chain taken apart
as simddp charges it."""
from __future__ import annotations

import dataclasses

import pytest

from calibrate.combine import combine_sequence
from calibrate.rig.shaped_chain import blocking_alpha_s, chain_s
from realrun.workflows.validate.probes import inputs_from_probes
from simddp import Layer, Link, ModelProfile, make_strategy, plan, simulate
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.link_file import LinkFile


def test_a_chain_by_hand():
    # bucket 1 ms of busbw, four calls of 1 ms of bytes, α 0.25 ms: the first call's bytes
    # all from the full bucket (0.25 ms), each next one refilled 0.25 during its α
    # (0.25 + 0.75 ms): 3.25 ms, and back
    assert chain_s(250e-6, [1e-3] * 4, 1e-3) == pytest.approx(3.25e-3)
    assert blocking_alpha_s(3.25e-3, [1e-3] * 4, 1e-3) == pytest.approx(250e-6)


def test_calls_the_bucket_serves_are_all_alpha():
    # calibrate's chain: 32 x 64 KiB at 0.25 GB/s (262 µs of bytes each), 250 kB bucket;
    # 600 µs a call refills more than a call's bytes, so none is paid at busbw
    bytes_s = [65536 / 0.25e9] * 32
    assert blocking_alpha_s(32 * 600e-6, bytes_s, 250_000 / 0.25e9) == pytest.approx(600e-6)
    wire = blocking_alpha_s(32 * 600e-6, bytes_s, None)        # a wire pays every byte
    assert wire == pytest.approx(600e-6 - 65536 / 0.25e9)


def test_a_chain_faster_than_its_bytes_allow_has_no_alpha():
    assert blocking_alpha_s(1e-3, [1e-3] * 4, 1e-3) == 0.0


def test_combine_sequence_takes_the_blocking_alpha_out_with_the_bucket():
    totals = {"blocking_s": [32 * 600e-6] * 3, "async_s": [32 * 500e-6] * 3}
    shaped = combine_sequence([totals] * 2, [65536] * 32, 0.25, 2, burst_bytes=250_000)
    wire = combine_sequence([totals] * 2, [65536] * 32, 0.25, 2)
    assert shaped["blocking_alpha_s"] == pytest.approx(600e-6)
    assert shaped["blocking_bytes_s"] == pytest.approx(0.0, abs=1e-12)
    assert wire["blocking_alpha_s"] == pytest.approx(600e-6 - 262.144e-6)
    assert wire["blocking_bytes_s"] == pytest.approx(32 * 262.144e-6)
    # the queued α is taken less every byte either way (the bucket does not refill there)
    assert shaped["alpha_s"] == wire["alpha_s"] == pytest.approx(500e-6 - 262.144e-6)
    assert shaped["blocking_alpha_per_repeat_s"] == pytest.approx([600e-6] * 3)


def test_simddp_charges_the_solved_alpha_back_to_the_measured_chain():
    # the round trip: a naive step's waited-for chain as simddp's engine times it, taken
    # apart by calibrate, gives back the link's blocking α. l1: one 1 MB gradient, l0: four
    # of 1 kB (1 ms and 1 µs of bytes at 1 GB/s); a 0.5 ms bucket.
    toy = ModelProfile("toy", (Layer("l0", (1000,) * 4, 0.001, 0.001),
                               Layer("l1", (1_000_000,), 0.001, 0.001)))
    link = LinkFile(Link("l", alpha_s=100e-6, busbw_gbps=1.0),
                    host=GlooHost(blocking_alpha_s=300e-6, burst_bytes=500_000))
    r = simulate(toy, link, plan(toy, make_strategy("naive")), world_size=2)
    spans = [s for s in r.spans if s.lane == "comm"]
    total_s = spans[-1].end_s - spans[0].start_s
    bytes_s = [1e-3] + [1e-6] * 4           # l1's first: the backward readies it first
    assert blocking_alpha_s(total_s, bytes_s, 0.5e-3) == pytest.approx(300e-6)


def test_inputs_from_probes_on_a_shaped_link_take_out_what_its_bucket_serves():
    # 4 x 1 MB (1 ms of bytes each at 1 GB/s), a 0.5 MB bucket: with α 1 ms the chain pays
    # 1 + 0.5 ms a call (6 ms: the bucket refills 0.5 during each α), the whole all-reduce
    # 1 + 4 - 0.5 ms (4.5 ms). A wire's formulas read α 0.5 ms; through the bucket, starting
    # from calibrate's 0.8 GB/s, α 1 ms and busbw 1 GB/s come back.
    link = LinkFile(Link("cal", 5e-4, 0.8, world_size=2), host=GlooHost(burst_bytes=500_000))
    medians = {"probe:flat": 0.0045, "probe:seq-blocking": 0.006}
    new, _, _ = inputs_from_probes(link, None, medians, [10 ** 6] * 4, 2)
    assert new.host.blocking_alpha_s == pytest.approx(1e-3)
    assert new.link.busbw_gbps == pytest.approx(1.0)
    wire, _, _ = inputs_from_probes(dataclasses.replace(link, host=GlooHost()), None, medians,
                                    [10 ** 6] * 4, 2)
    assert wire.host.blocking_alpha_s == pytest.approx(5e-4)


# 10 calls of 64 KiB after the first, each waited for: 9 of 0.4 ms and one that waited a
# scheduler tick, 4.4 ms; 0.8 ms a call on average. At 0.25 GB/s a call's bytes take 262 µs,
# and the 250 kB bucket holds 1 ms of them.
CLOCKED = {"blocking_s": [9e-3] * 3, "blocking_first_s": [1e-3] * 3, "async_s": [6e-3] * 3,
           "blocking_calls_s": [[0.4e-3] * 9 + [4.4e-3]] * 3}


def test_clocked_calls_say_what_each_hand_off_refills_the_bucket_by():
    # α: the 8 ms after the first call over 10 calls, every byte from the bucket (0.8 ms
    # refills more than 262 µs); the calls' α in proportion to their time: 9 of 0.4 ms and
    # one of 4.4, which the 1 ms bucket caps: (9 × 0.4 + 1.0) / 10 = 0.46 ms
    seq = combine_sequence([CLOCKED] * 2, [65536] * 11, 0.25, 2, burst_bytes=250_000)
    assert seq["blocking_alpha_s"] == pytest.approx(0.8e-3)
    assert seq["blocking_refill_s"] == pytest.approx(0.46e-3)
    assert (seq["blocking_call_median_s"], seq["blocking_call_mean_s"]) == pytest.approx(
        (0.4e-3, 0.8e-3))


def test_a_wire_or_unclocked_calls_have_no_refill():
    wire = combine_sequence([CLOCKED] * 2, [65536] * 11, 0.25, 2)
    assert "blocking_refill_s" not in wire and wire["blocking_call_mean_s"] == pytest.approx(8e-4)
    old = {k: v for k, v in CLOCKED.items() if k != "blocking_calls_s"}   # CUDA, older ranks
    shaped = combine_sequence([CLOCKED, old], [65536] * 11, 0.25, 2, burst_bytes=250_000)
    assert "blocking_refill_s" not in shaped and "blocking_call_median_s" not in shaped
    assert shaped["blocking_alpha_s"] == pytest.approx(0.8e-3)


def test_the_refill_the_calls_give_is_the_one_simddp_refills_by():
    # a naive chain of two 1 MB all-reduces on the shaped link, as the engine charges it,
    # taken apart with the same refill: α back
    toy = ModelProfile("toy", (Layer("l0", (1_000_000,), 0.001, 0.001),
                               Layer("l1", (1_000_000,), 0.001, 0.001)))
    link = LinkFile(Link("l", alpha_s=100e-6, busbw_gbps=1.0),
                    host=GlooHost(blocking_alpha_s=300e-6, burst_bytes=500_000,
                                  blocking_refill_s=100e-6))
    r = simulate(toy, link, plan(toy, make_strategy("naive")), world_size=2)
    spans = [s for s in r.spans if s.lane == "comm"]
    total_s = spans[-1].end_s - spans[0].start_s
    assert blocking_alpha_s(total_s, [1e-3] * 2, 0.5e-3, refill_share=1 / 3) == pytest.approx(
        300e-6)


def test_validate_s_probes_keep_the_calibrated_share_of_alpha_that_refills_the_bucket():
    # calibrate's calls said a hand-off refills half its α; the probes' chain is taken apart
    # under that share, and the link keeps it with the probes' α
    link = LinkFile(Link("cal", 5e-4, 0.8, world_size=2),
                    host=GlooHost(burst_bytes=500_000, blocking_alpha_s=1e-3,
                                  blocking_refill_s=5e-4))
    medians = {"probe:flat": 0.0045, "probe:seq-blocking": 0.006}
    new, _, _ = inputs_from_probes(link, None, medians, [10 ** 6] * 4, 2)
    gloo, busbw_gbps = new.host, new.link.busbw_gbps
    assert gloo.blocking_refill_s == pytest.approx(0.5 * gloo.blocking_alpha_s)
    bytes_s = [1e6 / (busbw_gbps * 1e9)] * 4
    assert chain_s(gloo.blocking_alpha_s, bytes_s, 500_000 / (busbw_gbps * 1e9),
                   gloo.blocking_refill_s) == pytest.approx(0.006)

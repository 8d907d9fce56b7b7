"""calibrate's blocking α on a shaped link: the chain taken apart as simddp charges it."""
from __future__ import annotations

import pytest

from calibrate.combine import combine_sequence
from calibrate.shaped_chain import blocking_alpha_s, chain_s
from simddp import Layer, Link, ModelProfile, make_strategy, plan, simulate


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
    link = Link("l", alpha_s=100e-6, busbw_gbps=1.0, blocking_alpha_s=300e-6,
                burst_bytes=500_000)
    r = simulate(toy, link, plan(toy, make_strategy("naive")), world_size=2)
    spans = [s for s in r.spans if s.lane == "comm"]
    total_s = spans[-1].end_s - spans[0].start_s
    bytes_s = [1e-3] + [1e-6] * 4           # l1's first: the backward readies it first
    assert blocking_alpha_s(total_s, bytes_s, 0.5e-3) == pytest.approx(300e-6)

"""calibrate's wake after compute: the first of its waited-for chain, taken apart.

The chain (calibrate/rig/sequence.py) follows 20 ms of compute. Its first call pays the
wake (``GlooHost.idle_wake_s``), the others the blocking α and their bytes; calibrate takes the
blocking α from the others and the wake from the first over its law.
"""
from __future__ import annotations

import pytest

from calibrate.rig.chain_first import wake_mean_s
from calibrate.combine import combine_sequence
from realrun.workflows.validate.probes import inputs_from_probes
from simddp import simulate
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.planning.plans import plan
from simddp.inputs.profile import Layer, ModelProfile
from simddp.planning.strategy import make_strategy


def test_the_engine_s_naive_chain_comes_back_apart():
    # a naive step of four 1 MB gradients (1 ms of bytes each at 1 GB/s, 2 ranks), each
    # waited for: as simddp times it, then as calibrate reads it
    toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10 ** 6,), 0.001, 0.002) for i in range(4)))
    link = LinkFile(Link("l", 100e-6, 1.0), host=GlooHost(blocking_alpha_s=300e-6,
                                                          idle_wake_s=2e-3))
    comm = [s for s in simulate(toy, link, plan(toy, make_strategy("naive")), 2).spans
            if s.lane == "comm"]
    first_s, total_s = comm[0].end_s - comm[0].start_s, comm[-1].end_s - comm[0].start_s
    assert first_s == pytest.approx(2e-3 + 300e-6 + 1e-3)
    rank = {"blocking_s": [total_s] * 3, "blocking_first_s": [first_s] * 3,
            "async_s": [0.005] * 3}
    seq = combine_sequence([rank, rank], [10 ** 6] * 4, 1.0, 2)
    assert seq["blocking_alpha_s"] == pytest.approx(300e-6)
    assert seq["idle_wake_s"] == pytest.approx(2e-3)
    assert seq["blocking_s"] == pytest.approx(total_s)    # the chain as measured, reported


def test_on_a_shaped_link_the_first_call_has_a_full_bucket():
    # 4 x 64 KiB at 0.25 GB/s (262 µs of bytes each) through a 250 kB bucket: the first
    # call's bytes all go at memory speed, so all it took over the blocking α is the wake
    rest = 3 * 600e-6
    rank = {"blocking_s": [rest + 2.6e-3] * 3, "blocking_first_s": [2.6e-3] * 3,
            "async_s": [0.002] * 3}
    seq = combine_sequence([rank] * 2, [65536] * 4, 0.25, 2, burst_bytes=250_000)
    assert seq["blocking_alpha_s"] == pytest.approx(600e-6)
    assert seq["idle_wake_s"] == pytest.approx(2e-3)


def test_without_the_first_call_timed_nothing_changes():
    rank = {"blocking_s": [0.05] * 2, "async_s": [0.03] * 2}
    seq = combine_sequence([rank] * 2, [10 ** 6] * 10, 1.0, 2)
    assert "idle_wake_s" not in seq and seq["blocking_alpha_s"] == pytest.approx(0.004)


def test_a_first_call_faster_than_its_law_is_no_wake():
    rank = {"blocking_s": [0.05] * 2, "blocking_first_s": [0.001] * 2, "async_s": [0.03] * 2}
    assert combine_sequence([rank] * 2, [10 ** 6] * 10, 1.0, 2)["idle_wake_s"] == 0.0


def test_the_mean_of_two_modes_not_the_commoner_one():
    # a third a scheduler tick late: the median would say 0.5 ms; trimmed of 3 at each end,
    # (17 x 0.5 + 7 x 3.5) / 24 ms
    fast, slow = [0.5e-3] * 20, [3.5e-3] * 10
    assert wake_mean_s([fast + slow]) == pytest.approx(1.375e-3)
    # per repeat the slowest rank; one warm-up outlier is trimmed away
    assert wake_mean_s([[1e-3] * 9 + [25e-3], [2e-3] * 10]) == pytest.approx(2e-3)


def test_realrun_validate_s_probes_take_the_wake_out_of_their_chain():
    # probes: 4 x 1 MB waited for after compute = wake 2 ms + 4 x (α 1 ms + 1 ms of bytes);
    # the whole 4 MB after a barrier = α + 4 ms. Without the wake taken out, α reads 1.67 ms.
    link = LinkFile(Link("cal", 5e-4, 0.8, world_size=2), host=GlooHost(idle_wake_s=2e-3))
    medians = {"probe:flat": 0.005, "probe:seq-blocking": 0.010}
    new, _, _ = inputs_from_probes(link, None, medians, [10 ** 6] * 4, 2)
    assert new.host.blocking_alpha_s == pytest.approx(1e-3)
    assert new.link.busbw_gbps == pytest.approx(1.0)
    assert new.host.idle_wake_s == 2e-3

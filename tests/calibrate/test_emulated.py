"""calibrate recovers a known link: 2 ranks on emulated hosts shaped to 1 and 2 Gbit/s.

    python -m pytest tests/calibrate/test_emulated.py -q     # ~35 s here; root + iproute2

Each host's NIC is shaped by tbf (realrun.launch.netns), so the wire carries R/8 GB/s: 0.125 GB/s at
1 Gbit/s. At p=2 a ring all-reduce sends n bytes per rank (busbw = algbw), so the fitted busbw
must double when R doubles, and stay below the wire rate. Sizes are 1..16 MiB, where the wire
dominates: 16 MiB is 134 ms at 1 Gbit/s against ~0.5 ms of α.
"""
from __future__ import annotations

import json

import pytest

from calibrate import cli
from realrun.launch import netns
from realrun.launch.errors import NetnsUnavailable
from simddp.inputs.io import load_link_file
from tests._messages import assert_names

pytestmark = pytest.mark.slow
# 1..32 MiB, 10 iterations: with 16 MiB and 5 iterations one CI run fitted 82% of the wire at
# 1 Gbit/s (ratio 2.35) while the same settings usually give 95%; more bytes, steadier medians.
# No reduce-scatter and all-gather sweeps (--kinds none): the ratio judged here is the
# all-reduce's, they took 8-10 s of each run's 26-32 s here (2026-11-29), and
# tests/calibrate/test_kinds.py runs and judges them.
SWEEP = ["--emulate-hosts", "2", "--min-bytes", "1M", "--max-bytes", "32M", "--warmup", "2",
         "--iters", "10", "--holdout-every", "0", "--no-contention", "--no-plots",
         "--kinds", "none"]


@pytest.fixture
def need_netns():
    try:
        netns.check_available()
    except NetnsUnavailable as e:
        pytest.skip(str(e))


def _fit_pair(tmp_path, capsys, attempt: int) -> dict[int, float]:
    busbw_gbps = {}
    for gbit in (1, 2):
        out = tmp_path / f"{gbit}gbit-{attempt}"
        rc = cli.main(SWEEP + ["--link-gbit", str(gbit), "--out", str(out)])
        stdout, stderr = capsys.readouterr()
        assert rc == 0, stderr
        measured = load_link_file(out / "link.json")
        link, gloo = measured.link, measured.host
        busbw_gbps[gbit] = link.busbw_gbps
        wire_gbps = gbit / 8
        results = json.loads((out / "allreduce.json").read_text())
        (run,) = results["runs"]
        # busbw against the wire, in allreduce.json and on screen
        assert (results["link_gbit"], results["emulate_hosts"]) == (gbit, 2)
        assert run["busbw_wire_fraction"] == pytest.approx(link.busbw_gbps / wire_gbps)
        assert_names(stdout, f"{run['busbw_wire_fraction']:.0%}")
        # Headers take ~4% of a 1500-byte frame and Gloo's copies and sums some more; under
        # the wire by more than 40% would mean the shaping or the fit is wrong.
        assert 0.6 * wire_gbps < link.busbw_gbps < 1.02 * wire_gbps, (gbit, link.busbw_gbps)
        assert link.name == f"emulated-{gbit}gbit-p2"
        assert_names(link.source, f"{gbit}", "Gbit/s")   # the link file says at what rate
        # the shaper's token bucket travels with the link, in its gloo_host section: simddp
        # charges it (simddp/rig/gloo_shared_cpu.py)
        assert gloo.burst_bytes == netns.tbf_burst_bytes(gbit) == max(131072, gbit * 125_000)
        # each waited-for call clocked: what its hand-off refills the bucket by, at most its α
        assert 0 < gloo.blocking_refill_s <= gloo.blocking_alpha_s
        seq = run["sequence"]
        assert seq["blocking_call_median_s"] > 0 and seq["blocking_call_mean_s"] > 0
        assert seq["blocking_refill_s"] == pytest.approx(gloo.blocking_refill_s)
    return busbw_gbps


def test_busbw_scales_with_the_emulated_link_rate(need_netns, tmp_path, capsys):
    # One re-measurement on a miss: the box is shared, and a scheduler stall in one of the
    # two runs moves the ratio; a shaping or fitting bug misses twice.
    for attempt in range(2):
        busbw_gbps = _fit_pair(tmp_path, capsys, attempt)
        ratio = busbw_gbps[2] / busbw_gbps[1]
        print(f"busbw 1 Gbit/s {busbw_gbps[1]:.4f} GB/s, 2 Gbit/s {busbw_gbps[2]:.4f} GB/s, "
              f"ratio {ratio:.3f}")
        if 1.8 <= ratio <= 2.2:
            break
    assert 1.8 <= ratio <= 2.2, busbw_gbps

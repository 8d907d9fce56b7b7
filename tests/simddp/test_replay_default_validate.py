"""Issue 15, replayed: the default `realrun validate` on recorded measurements.

tests/data/validate-default-2026-11-23/ holds one default run (mlp-8x1024, batch 2 x seq 8,
2 Gloo ranks, loopback, buckets 1,4,10,40; 2026-11-23 06:11 UTC) as `--out` wrote it: the
profile with its host costs (this model's own contention: compute x1.27, all-reduce x1.92),
the calibrated link and the 30 measured steps of every configuration (spans dropped). torch
DDP measured fastest at 4 MB (58.4 ms); 40 MB took 61.9 ms.

Before the fix, contention came from tight 256x256 matmul chunks against one all-reduce,
which measured all-reduces x4.6 slower under compute (compute x1.75; commit eaefae4): every
overlapped bucket looked ~2.5x too dear, and the simulator recommended one 40 MB bucket.
Replaying the same inputs with those factors must recommend 40 MB and cost more than the 3 %
margin; with the contention measured on the model's own backward, the recommendation must
be within the margin of the measured best.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from simddp import load_host, load_link_file, load_profile, load_results, recommend, sweep
from simddp.compare import compare_results, find_result
from simddp.inputs.contention import Contention

DATA = Path(__file__).resolve().parent.parent / "data" / "validate-default-2026-11-23"
STRATEGIES = ["naive", "flat", "overlap", "bucketed", "ddp"]
OLD_CONTENTION = (1.75, 4.6)   # matmul chunks, the model before issue 15
MARGIN_PCT = 3.0               # realrun.workflows.validate.report.MARGIN_PCT


def replay(old: bool) -> tuple[float, float]:
    """(recommended bucket MB, its measured regret in %) of one prediction of the recording."""
    profile = load_profile(DATA / "profile.json")
    link, host = load_link_file(DATA / "link.json"), load_host(DATA / "profile.json")
    if old:
        host = dataclasses.replace(host, contention=None)
        link = dataclasses.replace(link, contention=Contention(*OLD_CONTENTION, source="link"))
    predicted = sweep(profile, link, 2, STRATEGIES, [1, 4, 10, 40], host=host, ranges=True)
    rec = recommend(predicted)
    measured = load_results(DATA / "measured.json")
    best = min((r for r in measured if r.strategy == rec.strategy), key=lambda r: r.step_s)
    at = find_result(measured, rec.strategy, rec.bucket_mb)
    compare_results(predicted, measured)  # the recording is one job: this must not raise
    return rec.bucket_mb, 100 * (at.step_s / best.step_s - 1)


def test_the_recording_is_the_default_job():
    measured = load_results(DATA / "measured.json")
    assert {r.model for r in measured} == {"mlp-8x1024"}
    assert sorted(r.bucket_mb for r in measured if r.strategy == "ddp") == [1, 4, 10, 40]
    assert all(len(r.steps_s) == 30 for r in measured)


def test_the_old_contention_recommends_one_bucket_and_misses_the_margin():
    bucket_mb, regret_pct = replay(old=True)
    assert bucket_mb == 40
    assert regret_pct > MARGIN_PCT          # 6.0 %: 61.9 ms against 58.4


def test_the_models_own_contention_recommends_within_the_margin():
    bucket_mb, regret_pct = replay(old=False)
    assert bucket_mb < 40
    assert regret_pct <= MARGIN_PCT         # 4 MB: the measured best itself

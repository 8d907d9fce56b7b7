"""realrun validate's report puts a short summary first (issue 53 item 7) and its verdict
names the margin and the spread it was judged on (item 1); no processes, no timing.

The report is rebuilt from tests/data/validate-default-2026-11-23/ (one default run: 30
steps in turns of 5, so each row has split halves): simddp recommends ddp at 10 MB, which
measured 0.3 % slower than the pooled 1 and 4 MB, while those rows' halves read up to 12.1 %
apart. The old verdict read "WITHIN NOISE"; a similar run printed "PROVEN within noise …
either is fine". Now: "this run cannot tell: margin 2.7 % (3 % − 0.3 %) < spread 12.1 %".
"""
from __future__ import annotations

import json
from pathlib import Path

from realrun.workflows.validate.pipeline import predict
from realrun.workflows.validate.report import Prediction, ValidationReport
from realrun.workflows.validate.settings import ValidateSettings
from simddp import load_host, load_link_file, load_profile, load_results
from simddp.compare import compare_results
from tests._messages import assert_names, words

DATA = Path(__file__).resolve().parent.parent / "data" / "validate-default-2026-11-23"


def report() -> ValidationReport:
    profile = load_profile(DATA / "profile.json")
    link, host = load_link_file(DATA / "link.json"), load_host(DATA / "profile.json")
    measured = load_results(DATA / "measured.json")
    s = ValidateSettings(strategies=("naive", "flat", "overlap", "bucketed", "ddp"),
                         bucket_mbs=(1, 4, 10, 40), link=link)
    predicted = predict(profile, link, host, s)
    before = Prediction("before running", link, host, profile, predicted,
                        compare_results(predicted, measured, profile=profile)
                        .split_halves(s.chunk))
    return ValidationReport(s, None, None, measured, before, None, [], None, "",
                            (1.0, 2.0), 75.0)


def test_the_summary_comes_first_and_is_short():
    r = report()
    lines = r.text("out/v").splitlines()
    assert lines[0].split()[0] == "#"
    assert_names(lines[0], "mlp-8x1024")
    assert lines[1] == "summary:"
    end = lines.index("details:")
    summary = lines[2:end - 1]
    assert lines[end - 1] == "" and len(summary) <= 6
    # the verdict first: its word, and the measured best (1 and 4 MB pooled) with its median
    v = r.verdict()
    assert (v["word"], v["measured_best_mbs"]) == ("CANNOT TELL", [1.0, 4.0])
    assert summary[0].split()[0] == "verdict:" and v["word"] in summary[0]
    assert_names(summary[0], f"{v['measured_best_ms']:.2f}")
    # then how far off the prediction was: the median and the worst |error| and where
    c = r.comparison.summary
    assert (round(c.median_ape, 1), round(c.max_ape, 1)) == (5.7, 11.5)
    assert_names(summary[1], f"{c.median_ape:.1f}", f"{c.max_ape:.1f}", "bucketed:10")
    assert summary[2] == ("  recommended: ddp at 10 MB, measured 59.87 ms; measured best "
                          "bucket: 1 and 4 MB, 59.67 ms pooled")
    assert summary[3] == "  fastest configuration measured: bucketed:1, 56.85 ms median"
    assert summary[4].split()[0] == "files:"
    assert_names(summary[4], "out/v/", "validate.json")
    details = lines[end + 1:]
    assert details[0].split()[0] == "#" and "BEFORE" in words(details[0])
    # simddp's recommendation, as the JSON has it, among the details
    assert v["recommended_mb"] == 10
    assert v["recommendation"].splitlines()[0] in details
    assert not any("CANNOT" in words(line.upper()) for line in details)   # said once, above


def test_the_verdict_names_its_margin_and_spread_and_claims_nothing_stronger():
    r = report()
    text = r.text()
    for claim in ("PROVEN", "WITHIN", "fine"):
        assert claim not in words(text)
    v = json.loads(json.dumps(r.to_json()))["validate"]["verdict"]
    # the verdict line names the margin and the spread it was judged on
    (line,) = [x for x in text.splitlines() if x.split()[:1] == ["verdict:"]]
    assert_names(line, f"{v['verdict_margin_pct']:.1f}", f"{v['spread_pct']:.1f}")
    assert v["word"] == "CANNOT TELL" and v["proven"] is None and v["claim"] is None
    assert round(v["verdict_margin_pct"], 1) == 2.7 and round(v["spread_pct"], 1) == 12.1
    assert v["spread_from"] == "split halves" and v["turn_steps"] == 5
    # the verdict and compare's summary read the same regret off the same pooled steps
    s = r.comparison.summary
    assert round(v["regret_pct"], 1) == round(s.regret, 1) == 0.3
    assert v["regret_ci_pct"] == list(s.regret_ci)

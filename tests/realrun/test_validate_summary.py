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
    lines = report().text("out/v").splitlines()
    assert lines[0].startswith("# validate: mlp-8x1024")
    assert lines[1] == "summary:"
    end = lines.index("details:")
    summary = lines[2:end - 1]
    assert lines[end - 1] == "" and len(summary) <= 6
    assert summary[0].startswith("  verdict: CANNOT TELL: the measured best is 1 and 4 MB")
    assert summary[1].startswith("  prediction made before the runs: |error| median 5.7 %, "
                                 "max 11.5 % (bucketed:10)")
    assert summary[2] == ("  recommended: ddp at 10 MB, measured 59.87 ms; measured best "
                          "bucket: 1 and 4 MB, 59.67 ms pooled")
    assert summary[3] == "  fastest configuration measured: bucketed:1, 56.85 ms median"
    assert summary[4].startswith("  files: out/v/ (validate.json")
    details = lines[end + 1:]
    assert details[0].startswith("# prediction made BEFORE the runs")
    assert any(line.startswith("Recommended bucket_cap_mb: 10") for line in details)
    assert not any("cannot tell" in line.lower() for line in details)   # said once, above


def test_the_verdict_names_its_margin_and_spread_and_claims_nothing_stronger():
    r = report()
    text = r.text()
    assert ("this run cannot tell: margin 2.7 % (3 % − 0.3 %) < spread 12.1 % (the rows' "
            "split halves") in text
    for claim in ("PROVEN", "either is fine", "WITHIN NOISE"):
        assert claim not in text
    v = json.loads(json.dumps(r.to_json()))["validate"]["verdict"]
    assert v["word"] == "CANNOT TELL" and v["proven"] is None and v["claim"] is None
    assert round(v["verdict_margin_pct"], 1) == 2.7 and round(v["spread_pct"], 1) == 12.1
    assert v["spread_from"] == "split halves" and v["turn_steps"] == 5
    # the verdict and compare's summary read the same regret off the same pooled steps
    s = r.comparison.summary
    assert round(v["regret_pct"], 1) == round(s.regret, 1) == 0.3
    assert v["regret_ci_pct"] == list(s.regret_ci)

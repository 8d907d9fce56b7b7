"""Issue 53, item 9: the recommendation in the user's framework, in step with the sweep.

    python -m pytest tests/simddp/test_recommendation_frameworks.py -q   # no processes

Every size a framework line prints is the recommended one; the bucketed row it names is the
sweep's; no line asks for a flag the predictions did not assume; the argument names are the
libraries' own (checked against the installed transformers and torch where present).
"""
from __future__ import annotations

import dataclasses
import re

import pytest

from simddp import build_profile, get_link, parse_model
from simddp.inputs.profile import Layer, ModelProfile
from simddp.report.frameworks import framework_calls, framework_text
from simddp.report.recommendation import recommendation_text
from simddp.report.table import fmt_mb
from simddp.predict.sweep import sweep
from simddp.predict.recommend import recommend

SIZE = re.compile(r"\b(?:ddp_)?bucket_cap_mb=([\d.]+)")
SIZE_LIST = re.compile(r"bucket_cap_mb_list=\[([\d.]+), ([\d.]+)\]")
BUCKETED_MS = re.compile(r"the bucketed row at ([\d.]+) MB \(([\d.]+) ms\)")
# the sweep rows a line says a call runs: (strategy, size or "", its step or "not swept")
ROWS = re.compile(r"the (ddp|bucketed) rows?(?:'s buckets)?(?: at ([\d.]+) MB)?"
                  r"(?: \(([\d.]+ ms|not swept)[^)]*\))?")
MLP = ModelProfile("mlp", tuple(Layer(f"l{i}", (1 << 20,), 1e-3, 2e-3) for i in range(8)))


def framework_lines(text: str) -> list[str]:
    lines = text.splitlines()
    i = next(i for i, x in enumerate(lines) if x.startswith("In Hugging Face Trainer:"))
    return lines[i:i + 2]


@pytest.mark.parametrize("model, link, world, mbs, expected", [
    ("transformer-small", "eth-100g", 2, [1, 10, 100, 1000], "10"),   # the README's
    ("transformer-small", "ib-hdr", 8, [10, 25, 50], "25"),   # Accelerate's default
    ("mlp-8x1024", "eth-10g", 2, [0.25, 1, 4], "4"),
    (MLP, "eth-25g", 4, [0.25, 1, 4], "1"),                   # first bucket = cap
])
def test_framework_lines_print_the_recommended_size(model, link, world, mbs, expected):
    profile = model if isinstance(model, ModelProfile) else build_profile(parse_model(model))
    # the sizes as the sweep picks them without contention (a preset profile is on the a100,
    # which would take the published GPU figures)
    results = sweep(profile, get_link(link), world, ["naive", "bucketed", "ddp"], mbs,
                    contention="none")
    rec = recommend(results)
    text = recommendation_text(rec, results[0], results=results, profile=profile)
    lines = framework_lines(text)
    mb = fmt_mb(rec.bucket_mb)
    assert mb == expected
    found = SIZE.findall(" ".join(lines))
    assert len(found) >= 3 and set(found) == {mb}, lines
    for first, cap in SIZE_LIST.findall(lines[1]):
        assert (first, cap) == ("1", mb)
    for size, ms in BUCKETED_MS.findall(lines[1]):
        bucketed = next(r for r in results if r.strategy == "bucketed"
                        and r.bucket_mb == rec.bucket_mb)
        assert size == mb and ms == f"{bucketed.step_s * 1e3:.2f}"
    # no sweep row assumes them, so no line asks for them
    assert "static_graph" not in text and "gradient_as_bucket_view" not in text
    assert lines == framework_text(rec.bucket_mb, next(
        (r.step_s for r in results if r.strategy == "bucketed" and r.bucket_mb == rec.bucket_mb),
        None)).splitlines()


def test_which_row_each_size_runs():
    # 1 MB: the cap is the first bucket too, one configuration
    assert ROWS.findall(framework_text(1.0)) == [("ddp", "1", "")]
    # 25 MB, Accelerate's default: Trainer and Accelerate leave it out (torch's ddp row),
    # DDPStrategy passes it on (the bucketed row)
    assert ROWS.findall(framework_text(25.0, 0.1)) == [("ddp", "", ""),
                                                       ("bucketed", "25", "100.00 ms")]
    assert ROWS.findall(framework_text(4.0)) == [("bucketed", "4", "not swept"), ("ddp", "", "")]


def test_no_framework_lines_where_no_torch_ddp_row_is_recommended():
    profile = build_profile(parse_model("transformer-small"))
    link = get_link("eth-100g")
    bucketed = sweep(profile, link, 2, ["naive", "bucketed"], [1, 10],   # realrun.DDP's rows
                     contention="none")
    assert "Trainer" not in recommendation_text(recommend(bucketed), bucketed[0])
    accum = sweep(profile, link, 2, ["no_sync"], [1, 10], contention="none")   # per optimizer step
    assert "Trainer" not in recommendation_text(recommend(accum))


def test_the_names_are_the_libraries_own():
    torch = pytest.importorskip("torch")
    import inspect
    ddp = inspect.signature(torch.nn.parallel.DistributedDataParallel.__init__).parameters
    assert {"bucket_cap_mb", "find_unused_parameters"} <= set(ddp)
    transformers = pytest.importorskip("transformers")
    fields = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
    hf = framework_calls(10.0)[0]
    for name in re.findall(r"(\w+)=", hf):
        assert name in fields, name

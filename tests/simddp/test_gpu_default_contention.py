"""Issue 52 item 2: with no contention measured and the compute on a GPU, a sweep predicts
under the published GPU contention (compute x1.189, comm x2.22) and ranges from none to
x1.40 / x2.22; on a CPU, or where nothing says the device, it keeps none and the range to
x1.4 / x1.4; a measured contention always wins (docs/FINDINGS.md#gpu-contention-under-overlap).

    python -m pytest tests/simddp/test_gpu_default_contention.py -q     # no processes, < 10 s
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from simddp import Layer, Link, ModelProfile, make_strategy, plan, resolve, simulate, sweep
from simddp.inputs.contention import (PUBLISHED_GPU, PUBLISHED_GPU_HIGH, PUBLISHED_GPU_SHORT,
                                      Contention)
from simddp.inputs.host import Host
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.inputs.resolved import Inputs
from simddp.predict.resolve import choose_contention
from simddp.report.table import CONTENTION_FROM
from simddp.inputs.io import load_profile, profile_to_json, save_json
from simddp.predict.scenarios import UNCALIBRATED_CONTENTION, scenarios
from tests.simddp.cuda_trace_fixtures import mlp_job
from tests.simddp.golden import MEASURED
from tests.simddp.hand_traces import write
from tests.simddp.test_cli import cli

# Two layers, 1 ms forward and 2 ms backward each, one 1 MB gradient each: overlap's first
# all-reduce runs beside the second layer's backward, so contention moves it.
TOY = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
BARE = Link("l", 0.0, 1.0)


def default_contention(link, host=None, device=None) -> Contention:
    """The contention a prediction runs under on ``device`` where nobody chose one."""
    return choose_contention(as_link_file(link), host, device)


def test_the_default_by_device_and_what_wins_over_it():
    assert default_contention(BARE, device="h100") == Contention(
        *PUBLISHED_GPU, spread=((1.0, 1.0), PUBLISHED_GPU_HIGH), source="published")
    assert default_contention(BARE, device="cuda:1").source == "published"
    for device in ("cpu", None, "tpu"):
        assert default_contention(BARE, device=device) == Contention()
    calibrated = LinkFile(BARE, Contention(1.05, 1.3, source="link"))
    assert default_contention(calibrated, device="h100").factors == (1.05, 1.3)
    own = Host("h", contention=(1.5, 1.1))
    assert default_contention(BARE, own, device="h100").factors == (1.5, 1.1)


def test_on_a_gpu_the_point_is_the_published_contention_and_the_corners_its_ends():
    on_gpu = scenarios(resolve(replace(TOY, device="a100"), BARE))
    assert {k: s.contention.factors for k, s in on_gpu.items()} == {
        "low": (1.0, 1.0), "compute_bound": (1.0, 1.0),
        "high": PUBLISHED_GPU_HIGH, "comm_bound": PUBLISHED_GPU_HIGH}
    on_cpu = scenarios(resolve(replace(TOY, device="cpu"), BARE))  # as before: none .. x1.4
    assert {k: s.contention.factors for k, s in on_cpu.items()} == {
        "low": (1.0, 1.0), "compute_bound": (1.0, 1.0),
        "high": UNCALIBRATED_CONTENTION, "comm_bound": UNCALIBRATED_CONTENTION}


def test_the_sweeps_point_is_the_engine_under_the_published_factors():
    (r,) = sweep(TOY, BARE, 2, ["overlap"], ranges=True, device="a100")
    p = plan(TOY, make_strategy("overlap"))
    # the bare engine, under the published factors and under none
    point = simulate(p, Inputs(TOY, BARE, 2, Contention(*PUBLISHED_GPU))).step_s
    none = simulate(p, Inputs(TOY, BARE, 2)).step_s
    assert r.step_s == pytest.approx(point) and point > none
    assert r.step_range_s[0] == pytest.approx(none)
    (cpu,) = sweep(TOY, BARE, 2, ["overlap"], ranges=True)
    assert cpu.step_s == pytest.approx(none)


def _profile_file(tmp_path, measured: dict | None, contention=None):
    """The validate-default profile (measured on this box) with ``measured`` as given and
    its host costs' contention replaced by ``contention``."""
    doc = json.loads((MEASURED / "profile.json").read_text())
    doc["host_costs"].pop("contention_spread", None)
    doc["host_costs"].pop("contention")
    if contention is not None:
        doc["host_costs"]["contention"] = contention
    if measured is None:
        doc.pop("measured")
    else:
        doc["measured"] = measured
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("measured, published", [
    ({"device": "cuda:0", "backend": "nccl"}, True),    # realrun profile on one GPU
    ({"backend": "nccl"}, True),                         # a profile that names only NCCL
    ({"device": "cpu", "backend": "gloo"}, False),       # realrun profile here
    ({"source": "hand-written"}, False),                 # says nothing: as before
    (None, False),
])
def test_a_profile_file_says_its_device(tmp_path, capsys, measured, published):
    path = _profile_file(tmp_path, measured)
    code, out, _ = cli(capsys, "sweep", "--model", path, "--link", "eth-100g",
                       "--strategies", "overlap", "--format", "json")
    ranges = json.loads(out)["setup"]["ranges"]
    assert code == 0
    assert (PUBLISHED_GPU_SHORT in ranges) is published          # the ranges say their source
    code, out, _ = cli(capsys, "simulate", "--model", path, "--link", "eth-100g",
                       "--strategy", "overlap", "--format", "json")
    contention = json.loads(out)["contention"]
    assert code == 0
    if published:
        assert contention == {"compute": PUBLISHED_GPU[0], "comm": PUBLISHED_GPU[1],
                              "source": "published"}
    else:                                                         # none, not calibrated
        assert (contention["compute"], contention["comm"], contention["source"]) == (1, 1, None)


def test_the_models_own_contention_wins_on_a_gpu(tmp_path, capsys):
    path = _profile_file(tmp_path, {"device": "cuda:0"}, contention=[1.1, 1.2])
    code, out, _ = cli(capsys, "simulate", "--model", path, "--link", "eth-100g",
                       "--strategy", "overlap", "--format", "json")
    contention = json.loads(out)["contention"]
    assert code == 0 and (contention["compute"], contention["comm"]) == (1.1, 1.2)
    assert contention["source"] != "published"
    code, out, _ = cli(capsys, "sweep", "--model", path, "--link", "eth-100g",
                       "--strategies", "overlap")
    (line,) = [x for x in out.splitlines() if x.startswith("contention:")]
    assert code == 0 and CONTENTION_FROM["model"] in line   # the sweep says which it charged
    assert "x1.1," in line and "x1.2 " in line and "calibrated" not in out


def test_presets_by_device(capsys):
    for device, published in (("a100", True), ("h200", True), ("cpu", False)):
        code, out, _ = cli(capsys, "sweep", "--device", device, "--strategies", "overlap",
                           "--batch", "1", "--seq", "64")
        line = next(x for x in out.splitlines() if x.startswith("prediction ranges"))
        assert code == 0 and (PUBLISHED_GPU_SHORT in line) is published, line


def test_a_cuda_trace_imports_as_gpu_compute(tmp_path, capsys):
    trace, _ = mlp_job(host="fast")
    code, _, _ = cli(capsys, "trace-import", *write(tmp_path, [trace]), "--link",
                     "nvlink-h100", "--out", str(tmp_path / "imp"))
    assert code == 0
    doc = json.loads((tmp_path / "imp" / "profile.json").read_text())
    assert doc["measured"]["device"] == "cuda"
    code, out, _ = cli(capsys, "sweep", "--model", str(tmp_path / "imp" / "profile.json"),
                       "--link", "nvlink-h100", "--strategies", "overlap", "--format", "json")
    assert code == 0 and PUBLISHED_GPU_SHORT in json.loads(out)["setup"]["ranges"]
    # the same profile with its device left out predicts as before
    imported = load_profile(tmp_path / "imp" / "profile.json")
    assert imported.device == "cuda"
    save_json(tmp_path / "bare.json", profile_to_json(replace(imported, device=None)))
    code, out, _ = cli(capsys, "sweep", "--model", str(tmp_path / "bare.json"), "--link",
                       "nvlink-h100", "--strategies", "overlap", "--format", "json")
    ranges = json.loads(out)["setup"]["ranges"]
    assert code == 0 and PUBLISHED_GPU_SHORT not in ranges and "calibrated" in ranges


def test_simulate_predicts_what_the_sweep_does_and_says_why(capsys):
    # the same configuration, one step time: simulate takes the sweep's default contention
    from simddp.cli.main import main as cli
    assert cli(["simulate", "--strategy", "ddp", "--bucket-mb", "10", "--format", "json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert cli(["sweep", "--strategies", "ddp", "--bucket-mb", "10", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["rows"]
    assert sim["step_ms"] == row["step_ms"]
    assert doc["setup"]["contention"] == sim["contention"]     # one answer to "which contention"
    assert sim["contention"] == {"compute": 1.189, "comm": 2.22, "source": "published"}
    assert cli(["simulate", "--strategy", "ddp", "--bucket-mb", "10"]) == 0
    # the text says which contention it charged and where the figures come from
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("contention")]
    assert "x1.189" in line and "x2.22" in line and CONTENTION_FROM["published"] in line
    assert cli(["simulate", "--strategy", "ddp", "--device", "cpu", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["contention"]["source"] is None

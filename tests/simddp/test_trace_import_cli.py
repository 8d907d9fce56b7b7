"""``simddp trace-import``'s fits and helpers, and the command: its files, its flags, and a
trace lacking what is needed (one line, exit 2). Traces written by hand
(tests/simddp/hand_traces.py); no torch.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simddp.errors import InputError
from simddp.inputs.io import load_link, load_profile
from simddp.ingest.trace import import_traces
from simddp.ingest.trace.fit import ReplayStep, fit_compute_slowdown, fit_link
from simddp.ingest.trace.names import name_gradients
from simddp.ingest.trace.traced import _round_in
from tests.simddp.hand_traces import ROWS, STEPS, cli, job, ready_grads, write

ROOT = Path(__file__).resolve().parents[2]

# --- fits and helpers -----------------------------------------------------------------------

def test_link_fit_tells_latency_bandwidth_and_slowdown_apart():
    alpha, beta, slow = 100e-6, 1e-9, 2.0     # 1 GB/s busbw at 2 ranks
    steps = []
    for offset in (0.0, 0.002):
        ready = [offset + i * 0.001 for i in range(6)]
        nbytes = [2**k * 100_000 for k in range(6)]   # 0.1 .. 3.2 ms of bandwidth
        busy = (0.0, offset + 0.004)
        end, prev = [], -1.0
        for r, n in zip(ready, nbytes):
            t, work = max(r, prev), alpha + beta * n
            inside = max(0.0, min(work, (busy[1] - t) / slow))
            prev = t + inside * slow + (work - inside)
            end.append(prev)
        steps.append(ReplayStep(tuple(ready), tuple(nbytes), tuple(end), busy))
    fit = fit_link(steps, world_size=2)
    assert fit.sizes_separable and fit.slowdown_measured
    assert fit.alpha_s == pytest.approx(alpha, rel=0.05)
    assert fit.busbw_gbps == pytest.approx(1.0, rel=0.05)
    assert fit.comm_slowdown == pytest.approx(slow, rel=0.05)


def test_link_fit_does_not_guess_what_equal_sizes_cannot_tell():
    steps = [ReplayStep((0.0, 0.001), (1000, 1100), (0.0005, 0.0016), (0.0, 0.0))]
    fit = fit_link(steps, world_size=2)
    assert not fit.sizes_separable and fit.alpha_s == 0.0 and fit.comm_slowdown == 1.0


def test_link_fit_with_alpha_given_fits_only_bandwidth():
    # Two 1 MB all-reduces back to back after the backward: 0.5 ms of α + 1 ms of bytes each
    # at 1 GB/s busbw (2 ranks). Alone the sizes cannot tell α; with α given, busbw is exact.
    steps = [ReplayStep((0.0, 0.0), (10**6, 10**6), (0.0015, 0.003), (0.0, 0.0))]
    fit = fit_link(steps, world_size=2, alpha_s=0.0005)
    assert fit.alpha_given and not fit.sizes_separable and fit.alpha_s == 0.0005
    assert fit.busbw_gbps == pytest.approx(1.0, rel=0.01)
    assert fit_link(steps, world_size=2).busbw_gbps == pytest.approx(2 / 3, rel=0.01)


def test_compute_slowdown_from_repeated_work_beside_and_apart_from_comm():
    groups = {"block": [(1.0, 0.0), (1.02, 0.1), (1.5, 1.0), (1.48, 0.9), (9.0, 1.0)],
              "head": [(2.0, 0.0), (2.0, 0.0)]}        # no contrast: not used
    fit = fit_compute_slowdown(groups)
    assert fit.measured and fit.groups_used == 1 and fit.slowdown == pytest.approx(1.6, abs=0.1)
    assert not fit_compute_slowdown({"x": [(1.0, 0.0), (1.1, 0.2)]}).measured


def test_round_bucket_values():
    assert _round_in((0.0654, 0.2515)) == 0.25 and _round_in((30.0, float("inf"))) == 50.0
    assert _round_in((1.0, float("inf"))) == 25.0


def test_names_come_from_a_duck_typed_model(tmp_path):
    imp = import_traces(write(tmp_path, job()))
    params = []
    for i, rows in enumerate(ROWS):   # parameters() order: layer by layer, weight then bias
        params += [(f"l{i}.weight", (rows, 256), rows * 1024), (f"l{i}.bias", (256,), 1024)]
    named = name_gradients(imp.profile, imp.derived.grad_shapes, params)
    assert set(named.tensor_names) == {p[0] for p in params}
    assert named.tensor_names[named.n_tensors - 1] == f"l{len(ROWS) - 1}.bias"  # ready first
    with pytest.raises(InputError, match="trainable tensors"):
        name_gradients(imp.profile, imp.derived.grad_shapes, params[:-1])


# --- the command ----------------------------------------------------------------------------

def test_command_writes_profile_link_and_summary(tmp_path, capsys):
    paths = write(tmp_path, job())
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "trace-import", *paths, "--out", str(out))
    assert code == 0, err
    profile, link = load_profile(out / "profile.json"), load_link(out / "link.json")
    assert profile.grad_total_bytes == sum(b for _, b in ready_grads())
    assert link.world_size == 2
    doc = json.loads((out / "summary.json").read_text())
    assert doc["collectives"]["gradient_allreduces_per_step"] == len(ROWS)
    assert doc["steps"]["count"] == STEPS and doc["gradients"]["granularity"] == "parameter"
    for words in ("steps: 4 on every rank", "gradient all-reduces", "traced configuration: ddp",
                  "re-simulated", "predict: python -m simddp sweep"):
        assert words in stdout
    code, stdout, _ = cli(capsys, "sweep", "--model", str(out / "profile.json"), "--link",
                          str(out / "link.json"), "--strategies", "ddp", "--bucket-mb", "0.01,1")
    assert code == 0 and "ddp" in stdout


def test_alpha_us_is_kept_and_said(tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "trace-import", *write(tmp_path, job()), "--out", str(out),
                            "--alpha-us", "123")
    assert code == 0, err
    doc = json.loads((out / "summary.json").read_text())["link"]
    # the closure on the traced step scales α with the bandwidth term (closure.py)
    assert doc["alpha_given_us"] == 123 and load_link(out / "link.json").alpha_s \
        == pytest.approx(123e-6 * doc["comm_scale"], rel=1e-3)
    assert "(--alpha-us 123, scaled with the rest)" in stdout


def _corrupt(tmp_path: Path) -> dict:
    no_backward = job()
    for t in no_backward:
        t["traceEvents"] = [e for e in t["traceEvents"] if "evaluate_function" not in e["name"]]
    no_comm = job()
    for t in no_comm:
        t["traceEvents"] = [e for e in t["traceEvents"] if "all_reduce" not in e["name"]
                            and "allreduce" not in e["name"]]
    no_steps = job()
    for t in no_steps:
        t["traceEvents"] = [e for e in t["traceEvents"] if "Step" not in e["name"]
                            and "Optimizer" not in e["name"]]
    other = job(steps=STEPS)
    for t in other[1:]:   # rank 1 misses one all-reduce per step
        t["traceEvents"] = [e for e in t["traceEvents"] if not (
            e["name"] in ("gloo:all_reduce", "c10d::allreduce_")
            and e["args"].get("Input Dims") in ([[9216 // 4]], [[[9216 // 4]], []]))]
    dup = job()
    dup[1]["distributedInfo"]["rank"] = 0
    return {"no backward pass": no_backward, "no collective": no_comm,
            "record_shapes=True": job(shapes=False), "cannot tell the steps apart": no_steps,
            "gradient all-reduces": other, "both rank 0": dup}


@pytest.mark.parametrize("fragment", ["no backward pass", "no collective",
                                      "record_shapes=True", "cannot tell the steps apart",
                                      "gradient all-reduces", "both rank 0"])
def test_a_trace_lacking_what_is_needed_is_one_line_exit_2(tmp_path, capsys, fragment):
    paths = write(tmp_path, _corrupt(tmp_path)[fragment])
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "trace-import", *paths, "--out", str(out))
    assert code == 2 and fragment in err and err.count("\n") == 1, err
    assert stdout == "" and not out.exists()


@pytest.mark.parametrize("content, fragment", [
    (b"{not json", "not valid JSON"), (b'{"x": 1}', "not a Chrome trace"),
    (b'{"traceEvents": [{"ph": "M"}]}', "no complete events")])
def test_not_a_trace_is_one_line_exit_2(tmp_path, capsys, content, fragment):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    code, _, err = cli(capsys, "trace-import", str(bad), "--out", str(tmp_path / "o"))
    assert code == 2 and fragment in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, fragment", [
    (["--step-ms", "-1"], "--step-ms must be a number > 0"),
    (["--bucket-mb", "nan"], "--bucket-mb must be a number > 0"),
    (["--step-ms", "0.001"], "the traced all-reduces alone take"),
    (["--module", "nowhere.py:build"], "no such file nowhere.py"),
    (["--alpha-us", "-5"], "--alpha-us must be a number >= 0"),
    (["--alpha-us", "100", "--link", "eth-100g"], "--link already gives the whole link"),
])
def test_bad_flags_are_one_line_exit_2(tmp_path, capsys, argv, fragment):
    paths = write(tmp_path, job())
    code, _, err = cli(capsys, "trace-import", *paths, "--out", str(tmp_path / "o"), *argv)
    assert code == 2 and fragment in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_help_needs_no_torch():
    code = ("import sys, importlib.abc\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'torch' or name.startswith('torch.'):\n"
            "            raise ImportError('no torch here')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from simddp.cli.main import main\n"
            "main(['trace-import', '--help'])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "record_shapes=True" in done.stdout, done.stderr

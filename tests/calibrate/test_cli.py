"""``python -m calibrate``: bad input is one line and exit 2, a failed rank one line and exit 1
with nothing written, and small real runs (marked slow) write a link simddp can load.

    python -m pytest tests/calibrate/test_cli.py -q              # all (~1 min here)
    python -m pytest tests/calibrate/test_cli.py -q -m "not slow"  # bad input only, seconds
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from calibrate import cli
from calibrate.settings import parse_bytes, sweep_sizes
from simddp.inputs.contention_measurement import combine_contention as combine
from realrun.launch.errors import LaunchError
from simddp.inputs.io import load_link, load_link_file
from tests._messages import assert_names, assert_one_line
from tests._torchrun import torchrun

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Small and quick: 1 KiB..64 KiB is 7 sizes, 5 kept for the fit with every 3rd held out.
SMALL = ["--min-bytes", "1K", "--max-bytes", "64K", "--warmup", "1", "--iters", "3",
         "--sequence-count", "4", "--sequence-repeats", "2"]


def run_main(argv, capsys):
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# Each bad input's line names the flag(s) and the value at fault (single tokens).
@pytest.mark.parametrize("argv, names", [
    (["--min-bytes", "2M", "--max-bytes", "1M"], ("--min-bytes", "2097152", "--max-bytes")),
    (["--min-bytes", "lots"], ("--min-bytes", "lots")),
    (["--factor", "1"], ("--factor", "1.0")),
    (["--factor", "0.5"], ("--factor", "0.5")),
    (["--factor", "x"], ("--factor", "x")),
    (["--backend", "mpi"], ("--backend", "mpi")),
    (["--dtype", "float8"], ("--dtype", "float8")),
    (["--world-sizes", "1"], ("--world-sizes", "1")),
    (["--world-sizes", "2,x"], ("--world-sizes", "2,x")),
    (["--world-sizes", "2,2"], ("--world-sizes", "2,2")),
    (["--world-size", "0"], ("--world-sizes", "0")),
    (["--iters", "0"], ("--iters", "0")),
    (["--sequence-count", "0"], ("--sequence-count", "0")),
    (["--sequence-bytes", "x"], ("--sequence-bytes", "x")),
    (["--holdout-every", "1"], ("--holdout-every", "1")),
    (["--contention-mlp", "8"], ("--contention-mlp", "8")),
    (["--link-gbit", "1"], ("--link-gbit", "1", "--emulate-hosts")),
    (["--emulate-hosts", "3", "--world-sizes", "2,4"], ("--emulate-hosts", "3", "--world-size",
                                                        "2")),
    # 3 sizes, every 3rd held out: 2 left to fit a line that needs 3 (a piecewise one 6)
    (["--min-bytes", "1K", "--max-bytes", "4K"], ("3", "2", "--holdout-every")),
    (["--min-bytes", "1K", "--max-bytes", "64K", "--piecewise"], ("7", "5", "6")),
])
def test_bad_input_is_one_line_exit_2(argv, names, capsys, tmp_path):
    rc, out, err = run_main(argv + ["--out", str(tmp_path / "o")], capsys)
    assert rc == 2
    assert err.split()[0] == "calibrate:"
    assert_one_line(err, *names)
    assert out == "" and not (tmp_path / "o").exists()


def test_nccl_without_gpus(capsys, tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this box has CUDA GPUs")
    rc, _, err = run_main(["--backend", "nccl", "--out", str(tmp_path)], capsys)
    assert rc == 2
    assert_one_line(err, "--backend", "nccl", "gloo")   # names the fix too


def test_unwritable_out_dir(capsys, tmp_path):
    # Root ignores permission bits, so "unwritable" here is a path through a regular file.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, _, err = run_main(["--out", str(blocker / "sub")], capsys)
    assert rc == 2
    assert_one_line(err, "--out", str(blocker))


def test_failed_rank_exit_1_and_no_files(capsys, tmp_path, monkeypatch):
    import calibrate.calibration

    failure = "rank 1 failed: RuntimeError: boom"

    def fail(*args, **kwargs):
        raise LaunchError(failure)
    monkeypatch.setattr(calibrate.calibration, "run_world", fail)
    rc, out, err = run_main(SMALL + ["--out", str(tmp_path / "o")], capsys)
    assert (rc, out) == (1, "")
    assert err.split()[0] == "calibrate:" and err.count("\n") == 1
    assert err.rstrip().endswith(failure)     # the rank's failure, as it was raised
    assert not (tmp_path / "o").exists()


def test_parse_bytes_and_sizes():
    assert [parse_bytes("-b", t) for t in ("1024", "1K", "1KiB", "64M", "1.5k", "1G")] == [
        1024, 1024, 1024, 64 * 2 ** 20, 1536, 2 ** 30]
    assert sweep_sizes(1024, 64 * 2 ** 20, 2, 4)[-1] == 64 * 2 ** 20
    assert len(sweep_sizes(1024, 64 * 2 ** 20, 2, 4)) == 17  # the default sweep
    assert sweep_sizes(1, 16, 2, 4) == [4, 8, 16]  # rounded to whole float32 elements
    assert sweep_sizes(1000, 5000, 1.5, 1) == [1000, 1500, 2250, 3375]


def test_contention_clamps_below_one_and_says_so():
    # 20 ms of compute and 20 ms of comm alone. Together, in one rank's repeat the comm ends
    # first at 19 ms (faster than alone: noise, 0.95 clamped to 1.0) and compute at 30 ms
    # (19 ms slowed, 11 ms alone: x19/9 = 2.11); in the other compute ends at 30 ms (x1.5)
    # and comm at 35 ms (x2). The link keeps the mean over ranks of each.
    noisy = {"compute_alone_s": 0.020, "comm_alone_s": 0.020, "compute_together_s": 0.030,
             "comm_together_s": 0.019, "repeats": 5, "stream_bytes": 8, "stream_count": 1}
    clean = {**noisy, "comm_together_s": 0.035}
    c = combine([noisy])
    assert c["comm_slowdown"] == 1.0 and c["clamped"] == ["comm_slowdown"]
    assert c["comm_slowdown_raw"] == pytest.approx(0.95)
    (note,) = c["notes"]                        # the report prints it: what and by how much
    assert_names(note, "comm_slowdown", "0.950")
    both = combine([clean, noisy])
    assert (both["compute_slowdown"], both["comm_slowdown"]) == pytest.approx(
        ((1.5 + 19 / 9) / 2, (2.0 + 0.95) / 2))
    assert combine([clean])["notes"] == []
    short = combine([{**clean, "comm_alone_s": 0.002}])   # 2 ms of comm against 20 ms
    (note,) = short["notes"]                    # the factors are coarse: it names both times
    assert_names(note, "20.0", "2.0")


@pytest.mark.slow
def test_small_real_run(tmp_path):
    """The real entry point: 2 Gloo ranks, 11 sizes, contention with a 2-layer MLP.

    Up to 1 MiB, not SMALL's 64 KiB: α is the lone 4 KiB samples less their bytes term at
    the fitted busbw, and with 64 KiB on top a 64 KiB median one 4 ms tick late (3 iters)
    fits busbw ~0.016 GB/s, whose 4 KiB term (~250 µs) ate the whole α (the suite,
    2026-11-27: α <= 1 µs once). A 1 MiB row a tick late still fits ~0.2 GB/s (~20 µs)."""
    out = tmp_path / "cal"
    wider = [("1M" if a == "64K" else a) for a in SMALL]
    proc = subprocess.run(
        [sys.executable, "-m", "calibrate", *wider, "--contention-mlp", "2x256",
         "--contention-repeats", "2", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "algbw" in proc.stdout
    assert json.loads((out / "link.json").read_text())["format"] == "simddp.link/2"
    measured = load_link_file(out / "link.json")   # the link, its contention, Gloo's host
    link, gloo = measured.link, measured.host
    assert (link.world_size, link.backend) == (2, "gloo")
    assert link.alpha_s > 0 and link.busbw_gbps > 0
    # contention (1.0, 1.0) is written as none
    assert measured.contention is None or min(measured.contention.factors) >= 1.0
    low, high = link.time_spread   # p5 and p95 of an all-reduce over its median
    assert 0 < low <= 1.0 <= high
    assert gloo.blocking_alpha_s is not None and "back-to-back" in link.source
    # the link's source names the sweep it was fitted on
    assert_names(link.source, "1024..1048576", "11")
    results = json.loads((out / "allreduce.json").read_text())
    (run,) = results["runs"]
    # contention: 2 ranks, each timed the MLP and the all-reduces alone and together; the
    # report prints the factors the link file keeps
    cont = run["contention"]
    assert len(cont["per_rank"]) == 2 and min(cont["compute_slowdown"], cont["comm_slowdown"]) >= 1
    assert all(r["compute_alone_s"] > 0 and r["comm_alone_s"] > 0 for r in cont["per_rank"])
    assert_names(proc.stdout, f"x{cont['compute_slowdown']:.2f}", f"x{cont['comm_slowdown']:.2f}")
    # α of overlapped all-reduces is the small sizes' lone α (issue 19); the blocking one is
    # the sequence step's (4 x 64 KiB each waited for); the report prints both as the link
    # file keeps them
    assert_names(proc.stdout, f"{link.alpha_s * 1e6:.0f}", f"{gloo.blocking_alpha_s * 1e6:.0f}")
    # the chain's first call, after 20 ms of compute, apart: the wake (simddp.rig.gloo_shared_cpu)
    assert run["sequence"]["blocking_first_s"] > 0
    assert gloo.idle_wake_s == pytest.approx(run["sequence"]["idle_wake_s"]) and gloo.idle_wake_s >= 0
    assert [r["size_bytes"] for r in run["rows"]] == sweep_sizes(1024, 2 ** 20, 2, 4)
    seq = run["sequence"]
    assert (seq["count"], seq["bytes"], seq["repeats"]) == (4, 4 * 65536, 2)
    assert link.alpha_s == pytest.approx(seq["alpha_s"]) == pytest.approx(run["fit"]["alpha_s"])
    # α from the lone 4 KiB all-reduces sampled across the step: 4 per repeat, 2 repeats,
    # with their median's bootstrap interval (α is their fast mode's where that is wide)
    assert len(seq["lone_samples_s"]) == 8 and min(seq["lone_samples_s"]) > 0
    low, high = seq["alpha_interval_s"]
    assert 0 <= low <= high
    assert seq["sweep_small_alpha_s"] > 0     # the sweep's small sizes: reported, not used
    # the queue's figure, reported, not used; 0 when the busbw fitted on sizes up to 64 KiB
    # puts its bytes term above its whole time (CI, 2026-11-25), and then nothing is capped
    assert seq["queued_alpha_s"] >= 0
    assert link.alpha_s > 1e-6               # a Gloo all-reduce's α is tens of µs or more
    assert gloo.blocking_alpha_s == pytest.approx(seq["blocking_alpha_s"])
    # held out of the fit: 2, 16 and 128 KiB; the link's line, through the step's α, is
    # judged on those that take at least 2α (calibrate/judged.py)
    assert [r["size_bytes"] for r in run["rows"] if r["heldout"]] == [2048, 16384, 131072]
    assert all(r["time_s"] >= 2 * link.alpha_s for r in run["rows"]
               if r["size_bytes"] in run["heldout"]["heldout_bytes"])
    assert all(r["time_s"] <= r["p95_s"] for r in run["rows"])
    rows = list(csv.DictReader((out / "allreduce.csv").open()))
    assert len(rows) == 11 and rows[0]["busbw_gbps"] == rows[0]["algbw_gbps"]  # p=2: equal
    assert (out / "allreduce_time.png").stat().st_size > 10_000
    assert (out / "allreduce_busbw.png").stat().st_size > 10_000


@pytest.mark.slow
def test_profile_sets_the_sequence_and_contention_to_the_models_tensors(tmp_path):
    """--profile: α from one all-reduce per gradient tensor of that model, back to back."""
    from simddp import Layer, ModelProfile
    from simddp.inputs.io import profile_to_json, save_json
    profile = ModelProfile("three", tuple(Layer(f"l{i}", (4 * 128 * 128,), 1e-4, 2e-4)
                                          for i in range(3)))
    save_json(tmp_path / "p.json", profile_to_json(profile))
    out = tmp_path / "cal"
    proc = subprocess.run(
        [sys.executable, "-m", "calibrate", "--min-bytes", "1K", "--warmup", "1", "--iters",
         "3", "--sequence-repeats", "2", "--contention-repeats", "2", "--profile",
         str(tmp_path / "p.json"), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    run = json.loads((out / "allreduce.json").read_text())["runs"][0]
    assert (run["sequence"]["count"], run["sequence"]["bytes"]) == (3, 3 * 65536)
    # the sweep goes up to the gradient total, 192 KiB, rounded up to 1 MiB at least
    assert run["rows"][-1]["size_bytes"] == 1 << 20
    # contention: against the model's own 3 gradient tensors, 192 KiB in all
    streams = {(r["stream_count"], r["stream_bytes"]) for r in run["contention"]["per_rank"]}
    assert streams == {(3, 3 * 65536)}


def test_a_missing_profile_is_one_line_exit_2(capsys, tmp_path):
    rc, _, err = run_main(["--profile", str(tmp_path / "nope.json"),
                           "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.count("\n") == 1 and "nope.json" in err


@pytest.mark.slow
def test_two_world_sizes_one_link_each(tmp_path, capsys):
    out = tmp_path / "cal"
    rc, stdout, _ = run_main(SMALL + ["--world-sizes", "2,3", "--no-contention", "--no-plots",
                                      "--no-sequence", "--name", "lo", "--out", str(out)], capsys)
    assert rc == 0
    files = {p: load_link_file(out / f"link-p{p}.json") for p in (2, 3)}
    links = {p: f.link for p, f in files.items()}
    # --no-sequence: α is the sweep's intercept, one α for every plan
    assert all(f.host.blocking_alpha_s is None for f in files.values())
    runs = {r["world_size"]: r for r in json.loads((out / "allreduce.json").read_text())["runs"]}
    assert all(r["sequence"] is None for r in runs.values())
    assert {p: (link.name, link.world_size) for p, link in links.items()} == {
        2: ("lo-p2", 2), 3: ("lo-p3", 3)}
    assert not (out / "link.json").exists()
    # one line per world size under the table, its α (µs) as the link file has it
    for p, link in links.items():
        assert [line.split()[1] for line in stdout.splitlines()
                if line.split()[:1] == [str(p)]] == [f"{link.alpha_s * 1e6:.1f}"]
    if (os.cpu_count() or 1) < 3:
        assert runs[3]["oversubscribed"] and "oversubscribed" in stdout


@pytest.mark.slow
def test_under_torchrun(tmp_path):
    """torchrun starts the ranks; calibrate uses its world, and only rank 0 writes."""
    out = tmp_path / "cal"
    proc = torchrun(["-m", "calibrate", *SMALL, "--no-contention", "--no-plots", "--out", str(out)],
                    cwd=ROOT, timeout_s=180)
    assert proc.stdout.count("# all_reduce gloo, 2 ranks") == 1  # rank 0 reports, once
    assert load_link(out / "link.json").world_size == 2

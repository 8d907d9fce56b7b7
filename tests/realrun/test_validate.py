"""realrun validate: bad input in one line (exit 2), failures kept per config, a tiny real run.

Unit tests start no processes; the end-to-end test (2 ranks, mlp-2x64, 2 bucket sizes, a
given --link so nothing is calibrated) is marked slow and takes ~15 s here.
"""
from __future__ import annotations

import json
import os

import pytest

from realrun.cli import main
from simddp.inputs.io import link_to_json, save_json
from simddp.inputs.link import Link
from simddp.result import Result
from tests._messages import assert_names

TINY = ["--model", "mlp-2x64", "--batch", "1", "--seq", "2"]


def _one_line_exit_2(capsys, argv) -> str:
    try:
        code = main(["validate", *argv])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def link_file(tmp_path):
    path = tmp_path / "link.json"
    save_json(path, link_to_json(Link("test-link", 200e-6, 1.0, world_size=2)))
    return str(path)


@pytest.mark.parametrize("argv, words", [
    (["--strategies", "naive,bogus"], "bogus"),
    (["--bucket-mb", ""], "--bucket-mb"),
    (["--bucket-mb", "1,-3"], "--bucket-mb"),
    (["--world-size", "1"], "--world-size"),
    (["--emulate-hosts", "3"], "--emulate-hosts"),
    (["--link-gbit", "1"], "--link-gbit"),
    (["--warmup", "1"], "--warmup"),
    (["--steps", "0"], "--steps"),
    (["--model", "nonsense-model"], "nonsense-model"),
    (["--model", "mlp-2x64", "--heads", "2"], "--heads"),
    (["--link", "/nonexistent/link.json"], "/nonexistent/link.json"),
    (["--no-such-flag"], "--no-such-flag"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, words):
    assert_names(_one_line_exit_2(capsys, TINY + argv if argv[0] != "--model" else argv), words)


def test_link_of_another_world_size_is_refused(capsys, tmp_path):
    path = tmp_path / "p4.json"
    save_json(path, link_to_json(Link("four", 1e-4, 1.0, world_size=4)))
    err = _one_line_exit_2(capsys, TINY + ["--link", str(path)])
    assert_names(err, "four", "4", "2", "--rescale-link")   # the link, both sizes, the way out


def test_malformed_link_file_is_refused(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "simddp.profile/1"}')
    _one_line_exit_2(capsys, TINY + ["--link", str(path)])


def test_predicted_ddp_keeps_the_1mib_first_bucket(link_file):
    """bench runs torch DDP with bucket_cap_mb_list=[1, X]: the plan is simddp's ddp rule."""
    from realrun.workflows.validate import ValidateSettings, predict
    from simddp.inputs.io import load_link_file
    from simddp.inputs.profile import Layer, ModelProfile
    prof = ModelProfile("toy", tuple(Layer(f"l{i}", (2 ** 20,), 1e-3, 2e-3) for i in range(4)))
    s = ValidateSettings(model="mlp-2x64", strategies=("bucketed", "ddp"), bucket_mbs=(2,),
                         link=load_link_file(link_file))
    by = {r.strategy: r for r in predict(prof, load_link_file(link_file), None, s)}
    # bucketed at 2 MiB: [l3, l2], [l1, l0]; ddp: [l3] (1 MiB first bucket), [l2, l1], [l0]
    assert (by["bucketed"].collectives, by["ddp"].collectives) == (2, 3)


def test_a_failed_config_is_named_and_the_others_kept(monkeypatch, link_file):
    """The shared world fails; each config reruns alone; only the broken one is lost."""
    import realrun.workflows.validate.pipeline as pipeline
    from realrun.bench import BenchRun
    from realrun.launch.errors import LaunchError
    from realrun.workflows.validate import ValidateSettings, measure
    from simddp.inputs.io import load_link

    def fake_run_bench(payload, **world):
        configs = payload["configs"]
        if any(c["strategy"] == "bucketed" and c["bucket_mb"] == 2.0 for c in configs):
            raise LaunchError("rank 1 failed: RuntimeError: boom", rank=1)
        return BenchRun([Result("m", "l", c["strategy"], c["bucket_mb"], 2, 0.01, 0.0, 1,
                                source="measured", step_p5_s=0.01, step_p95_s=0.01, samples=3)
                         for c in configs], [], {})

    monkeypatch.setattr(pipeline, "run_bench", fake_run_bench)
    s = ValidateSettings(model="mlp-2x64", strategies=("naive", "bucketed"),
                         bucket_mbs=(1, 2), link=load_link(link_file), probes=False)
    logs = []
    results, probes, failures = measure(s, log=logs.append)
    assert failures == ["bucketed:2: rank 1 failed: RuntimeError: boom"]
    assert sorted((r.strategy, r.bucket_mb) for r in results) == [
        ("bucketed", 1.0), ("compute-only", None), ("naive", None)]
    assert any("retrying" in line for line in logs)


@pytest.mark.slow
def test_tiny_end_to_end_json_and_plots(tiny_validate):
    """The shared tiny run (tests/realrun/conftest.py): its report, files and timeline."""
    doc, out = tiny_validate.doc, tiny_validate.out
    assert set(doc) >= {"rows", "summary"}
    # 2 ranks x (1 thread + Gloo's 3): cautioned below 8 CPUs (simddp/rig/cpu_share.py)
    assert (doc["cpu_note"] is not None) == (len(os.sched_getaffinity(0)) < 8)
    assert set(doc["summary"]) >= {"median_ape", "max_ape", "spearman",
                                   "predicted_best_bucket_mb", "measured_best_bucket_mb",
                                   "regret"}
    configs = {(r["strategy"], r["bucket_mb"]) for r in doc["rows"]}
    assert ("bucketed", 1.0) in configs and ("ddp", 0.01) in configs and ("naive", None) in configs
    verdict = doc["validate"]["verdict"]
    assert verdict["recommended_mb"] in {r["bucket_mb"] for r in doc["rows"]}
    assert_names(verdict["recommendation"].splitlines()[0], "bucket_cap_mb",
                 f"{verdict['recommended_mb']:g}")
    for name in ("compare_scatter.png", "compare_buckets.png", "compare_timeline.png",
                 "validate.json", "predicted.json", "measured.json"):
        assert (out / name).stat().st_size > 0, name
    measured = json.loads((out / "measured.json").read_text())
    assert any(r.get("spans") for r in measured["results"]), \
        f"no measured timeline spans: {doc['validate'].get('timeline_note')!r}; " \
        f"{tiny_validate.stderr}"
    (clocked,) = [r for r in measured["results"] if r.get("spans")]   # every rank's step
    assert len(clocked["rank_spans"]) == 2 and clocked["spans"] == \
        clocked["rank_spans"][clocked["spans_rank"]]
    # the summary is the prediction made before running: every row scored, with a range
    assert not any(r["input"] for r in doc["rows"])
    assert doc["summary"]["configs"] == len(doc["rows"])
    assert all(r["predicted_range_ms"] for r in doc["rows"] if r["strategy"] != "compute-only")
    assert doc["summary"]["with_range"] >= 1
    # the anchored one second: compute set from the measured compute-only row, which is then
    # an input, not scored
    anchored = doc["anchored"]
    anchor = anchored["inputs"]["compute_anchor"]
    compute_row = next(r for r in anchored["rows"] if r["strategy"] == "compute-only")
    assert compute_row["input"] and compute_row["predicted_ms"] == pytest.approx(
        anchor["measured_ms"]) == pytest.approx(compute_row["measured_ms"])
    assert anchored["summary"]["configs"] == len(anchored["rows"]) - 1
    assert set(anchored["inputs"]["probes"]["medians_ms"]) >= {"probe:flat", "probe:solo-torch"}
    # the host costs measured with the profile are used for the prediction, apart from the link
    host = doc["validate"]["host_costs"]
    assert host["realrun"]["copy_gbps"] > 0 and host["realrun"]["hook_us"] >= 0
    assert host["torch"]["hook_us"] >= 0 and "copy_gbps" not in doc["validate"]["link"]
    assert len(host["contention"]) == 2 and min(host["contention"]) >= 1.0
    saved = json.loads((out / "profile.json").read_text())
    # FSDP2's costs too: the shared run has fsdp and zero2 rows
    assert set(saved["host_costs"]["implementations"]) == {"realrun", "torch", "fsdp"}
    assert len(saved["compute_spread"]) == 2
    assert not any(r["strategy"].startswith("probe:") for r in doc["rows"])
    assert (out / "anchored_predicted.json").stat().st_size > 0
    for c in (doc, anchored):   # 4 steps in turns of 2, split (simddp/compare/noise.py)
        assert c["halves"]["turn_steps"] == 2 and all(r["halves_apart_pct"] >= 0
                                                      for r in c["rows"])


def test_free_copies_runs_no_host_cost_probes():
    from realrun.workflows.validate import ValidateSettings
    names = lambda s: s.probes_run()  # noqa: E731
    assert not any(c["strategy"].startswith("probe:") for c in ValidateSettings().configs())
    assert names(ValidateSettings()) == ["probe:flat", "probe:seq-blocking",
                                         "probe:copy", "probe:scale", "probe:solo-wrapper",
                                         "probe:solo-bucket", "probe:solo-torch",
                                         "probe:contention"]
    assert names(ValidateSettings(model_copies=False)) == [
        "probe:flat", "probe:seq-blocking", "probe:contention"]
    assert names(ValidateSettings(probes=False)) == []


def test_anchor_compute_scales_every_phase_by_one_factor():
    from realrun.workflows.validate.inputs import scale_to_compute_only
    from simddp.inputs.profile import Layer, ModelProfile
    profile = ModelProfile("m", (Layer("a", (4,), 0.010, 0.020), Layer("b", (4,), 0.005, 0.005)),
                           optimizer_s=0.010)            # 50 ms of compute per step
    row = Result("m", "l", "compute-only", None, 2, 0.060, 0.0, 0, source="measured")
    scaled, info = scale_to_compute_only(profile, [row])
    assert info == {"profile_ms": pytest.approx(50.0), "measured_ms": pytest.approx(60.0),
                    "factor": pytest.approx(1.2)}
    assert [layer.backward_s for layer in scaled.layers] == pytest.approx([0.024, 0.006])
    assert scaled.optimizer_s == pytest.approx(0.012)
    assert scale_to_compute_only(profile, []) is None


def test_hook_fields_subtract_each_implementations_copies():
    from realrun.ddp_host_costs import hook_fields
    copy = {"copy_gbps": 1.0, "in_place_gbps": 2.0}            # 4 x 1 MB: 2 ms in place
    out = hook_fields({"plain_s": 0.040, "wrapper_s": 0.050, "torch_s": 0.049}, copy,
                      [10 ** 6] * 4)                           # torch: 8 ms of copies
    assert out == {"hook_s": pytest.approx(0.002), "launch_s": 0.0,
                   "ddp_hook_s": pytest.approx(0.00025)}
    # with the one-bucket step, what overlap pays per collective splits off: overlap 8 ms
    # over plain and copies = 4 hooks + 4 launches, one bucket 5 ms = 4 hooks + 1 launch
    split = hook_fields({"plain_s": 0.040, "wrapper_s": 0.050, "bucket_s": 0.053,
                         "torch_s": 0.049}, copy, [10 ** 6] * 4)
    assert split["launch_s"] == pytest.approx(0.001) and split["hook_s"] == pytest.approx(0.001)
    # noise can make a step look cheaper than its copies: never a negative cost
    assert hook_fields({"plain_s": 0.04, "wrapper_s": 0.04, "torch_s": 0.04}, copy,
                       [10 ** 6] * 4) == {"hook_s": 0.0, "launch_s": 0.0, "ddp_hook_s": 0.0}


def test_inputs_from_probes_solve_alpha_busbw_and_the_host_costs():
    # 4 tensors of 1 MB, p = 2 (1 MB moved each): flat 5 ms = α_b + b, blocking sequence
    # 11 ms = 4 α_b + b -> α_b 2 ms, b 3 ms -> busbw 4 MB / 3 ms = 1.333 GB/s; the α of
    # overlapped all-reduces stays calibrate's (issue 19). Solo steps as in the test above.
    from realrun.workflows.validate.probes import inputs_from_probes
    from simddp.inputs.gloo_host import GlooHost
    from simddp.inputs.host import Host, HostCosts
    from simddp.inputs.link_file import LinkFile
    # calibrate's link on Gloo: its file has a gloo_host section, where the blocking α goes
    link = LinkFile(Link("cal", 5e-3, 0.5, world_size=2), host=GlooHost())
    earlier = Host("profile", {"realrun": HostCosts(copy_gbps=1.0, scale_gbps=2.0,
                                                    hook_after_backward_s=3e-5)})
    medians = {"probe:flat": 0.005, "probe:seq-blocking": 0.011,
               "compute-only": 0.040, "probe:solo-wrapper": 0.050, "probe:solo-bucket": 0.053,
               "probe:solo-torch": 0.049}
    new, host, info = inputs_from_probes(link, earlier, medians, [10 ** 6] * 4, 2)
    assert new.host.blocking_alpha_s == pytest.approx(0.002)
    assert new.link.alpha_s == link.link.alpha_s
    assert new.link.busbw_gbps == pytest.approx(4e6 / 3e-3 / 1e9)
    r, t = host.costs("realrun"), host.costs("torch")
    assert (r.hook_s, r.launch_s, t.hook_s) == pytest.approx((0.001, 0.001, 0.00025))
    assert r.hook_after_backward_s == 3e-5   # the profile's flat calls: no probe of its own
    assert info["calibrated"]["busbw_gbps"] == 0.5 and "alpha_s" not in info["fields"]
    # the copy probes set the copy rates the hook split then uses: 8 ms both ways for 4 MB
    # (1 GB/s) and 2 ms in place (2 GB/s) leave the solo steps' costs as above
    stale = Host("profile", {"realrun": HostCosts(copy_gbps=9.0, scale_gbps=9.0)})
    _, again, info = inputs_from_probes(link, stale,
                                        {**medians, "probe:copy": 0.008, "probe:scale": 0.002},
                                        [10 ** 6] * 4, 2)
    r = again.costs("realrun")
    assert (r.copy_gbps, r.scale_gbps, again.costs("torch").copy_gbps) == pytest.approx(
        (1.0, 2.0, 1.0))
    assert (r.hook_s, r.launch_s) == pytest.approx((0.001, 0.001))
    assert info["host_before"]["realrun"]["copy_gbps"] == 9.0
    # no probes measured: link and host are unchanged
    assert inputs_from_probes(link, earlier, {}, [10 ** 6] * 4, 2)[:2] == (link, earlier)


def test_the_contention_probe_sets_the_links_slowdowns():
    """Per rank: compute 20 ms alone, comm 20 ms alone; together compute ends at 30 ms and comm
    at 35 ms: x1.5 and x2 (simddp.inputs.contention.slowdowns); on the quieter rank 25 and 30 ms:
    x1.25 and 25/(25 + 20 - 30) = x5/3. The mean over ranks is kept."""
    from realrun.workflows.validate.probes import inputs_from_probes
    from simddp.inputs.contention import Contention
    from simddp.inputs.gloo_host import GlooHost
    from simddp.inputs.link_file import LinkFile
    rank = {"compute_alone_s": 0.020, "comm_alone_s": 0.020, "compute_together_s": 0.030,
            "comm_together_s": 0.035, "repeats": 30, "stream_bytes": 8, "stream_count": 1}
    quiet = {**rank, "compute_together_s": 0.025, "comm_together_s": 0.030}
    calibrated = LinkFile(Link("cal", 1e-3, 1.0, world_size=2),
                          Contention(1.7, 4.6, source="link"), GlooHost())
    link, _, info = inputs_from_probes(calibrated, None, {}, [10 ** 6] * 4, 2,
                                       contention=[rank, quiet])
    assert link.contention.factors == pytest.approx(
        ((1.5 + 1.25) / 2, (2.0 + 5 / 3) / 2))
    assert info["calibrated"]["comm_slowdown"] == 4.6

"""Issue 63 item 4: `realrun profile` says what will run, estimates how long from its first
step, shows progress on stderr, and refuses a preset that cannot fit this machine's memory.

    python -m pytest tests/realrun/test_profile_progress.py -q     # one tiny world, ~15 s

The progress is tested on a fake clock; one tiny 1-rank profile checks that the steps each
phase plans are the steps it runs.
"""
from __future__ import annotations

import argparse
import re
from types import SimpleNamespace

import pytest

from realrun.memory_fit import (CANNOT, CLOSE, FITS, Machine, host_memory, judge, preset_need,
                                rank_need)
from realrun.step_progress import DONE, ESTIMATE, PROGRESS, StepProgress, about
from simddp.errors import InputError
from simddp.presets.models import parse_model

GB = 10**9


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def run_steps(progress: StepProgress, clock: FakeClock, phases: dict[str, int],
              step_s: float) -> None:
    for name, steps in phases.items():
        progress.phase(name)
        for _ in range(steps):
            clock.now_s += step_s
            progress.step()
    progress.close()


def make(planned: dict[str, int], **kwargs) -> tuple[StepProgress, FakeClock, list[str]]:
    clock, lines = FakeClock(), []
    return StepProgress(planned, clock=clock, write=lines.append, **kwargs), clock, lines


def test_long_work_estimates_after_its_first_step_then_reports_at_intervals():
    progress, clock, lines = make({"a": 100, "b": 200})   # 300 steps of 1 s
    run_steps(progress, clock, {"a": 100, "b": 200}, step_s=1.0)
    reports = progress.reports
    first = reports[0]
    assert (first.kind, first.done, first.total, first.elapsed_s, first.left_s) == (
        ESTIMATE, 1, 300, 1.0, 299.0)
    assert reports[-1].kind == DONE and reports[-1].done == 300 and reports[-1].elapsed_s == 300
    middle = reports[1:-1]
    assert middle and all(r.kind == PROGRESS for r in middle)
    # 300 s of work: a line every 300 / 15 = 20 s
    assert [r.elapsed_s for r in middle] == [21.0 + 20 * i for i in range(len(middle))]
    assert [r.phase for r in middle][:4] == ["a"] * 4 and middle[-1].phase == "b"
    assert all(r.left_s == pytest.approx(300 - r.done) for r in middle)   # 1 s a step
    assert len(lines) == len(reports)
    for report, line in zip(reports, lines):
        assert f"{report.done}/{report.total}" in line
        if report.kind == PROGRESS:
            assert about(report.left_s) in line
        elif report.kind == ESTIMATE:
            assert about(report.elapsed_s + report.left_s) in line


def test_intervals_stay_within_5_and_60_seconds():
    for step_s, steps, every_s in ((0.1, 200, 5.0), (100.0, 30, 60.0)):
        progress, clock, _ = make({"a": steps})
        run_steps(progress, clock, {"a": steps}, step_s=step_s)
        times = [r.elapsed_s for r in progress.reports if r.kind == PROGRESS]
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert gaps and all(every_s <= g < every_s + step_s + 1e-9 for g in gaps)


def test_short_work_prints_nothing():
    progress, clock, lines = make({"a": 30})
    run_steps(progress, clock, {"a": 30}, step_s=0.2)   # 6 s in all
    assert progress.reports == [] and lines == []


def test_work_that_turns_long_reports_once_it_has():
    progress, clock, lines = make({"a": 10, "b": 10})
    progress.phase("a")
    for _ in range(10):
        clock.now_s += 0.1
        progress.step()
    assert lines == []                      # 1 s so far, ~2 s projected
    progress.phase("b")
    clock.now_s += 30.0                     # a slow step
    progress.step()
    (report,) = progress.reports
    assert (report.kind, report.done, report.phase) == (ESTIMATE, 11, "b")
    assert report.left_s == pytest.approx(9 * 31.0 / 11)


def test_a_phase_not_counted_step_by_step_jumps_to_the_next_phase():
    progress, clock, _ = make({"a": 10, "b": 10}, quiet_s=0.0, every_s=0.0)
    progress.phase("a")
    for _ in range(4):                      # 6 of its 10 steps are uncounted work
        clock.now_s += 1.0
        progress.step()
    clock.now_s += 6.0
    progress.phase("b")
    progress.step()
    last = progress.reports[-1]
    assert (last.done, last.phase, last.elapsed_s) == (11, "b", 10.0)
    assert last.left_s == pytest.approx(9 * 10.0 / 11)
    assert progress.counted == {"a": 4, "b": 1}


def test_the_terminal_gets_a_bar_between_the_estimate_and_the_done_line():
    progress, clock, lines = make({"a": 60}, tty=True)
    run_steps(progress, clock, {"a": 60}, step_s=1.0)
    assert [r.kind for r in progress.reports] == [ESTIMATE, DONE] and len(lines) == 2


def test_a_silent_progress_counts_nothing():
    progress, clock, lines = make({"a": 60}, show=False)
    run_steps(progress, clock, {"a": 60}, step_s=10.0)
    assert progress.reports == [] and lines == [] and progress.done == 0


# -- memory ----------------------------------------------------------------------------------

def test_a_rank_holds_weights_bucket_optimizer_and_the_larger_of_gradients_or_forward():
    # mlp-2x16 at batch 1 x seq 4: 512 parameters, 2 KiB each of weights, gradients, bucket;
    # activations 3 x 4 rows x 16 x 4 B (simddp/analytic/memory.py)
    need = preset_need(parse_model("mlp-2x16"), 1, 4, "sgd", "fp32")
    assert (need.n_params, need.weights_bytes, need.activations_bytes) == (512, 2048, 768)
    assert need.total_bytes == 3 * 2048
    adam = rank_need(GB, "adam", "bf16", activations_bytes=3 * GB)
    assert adam.total_bytes == (4 + 4 + 8 + max(4, 2 + 3)) * GB


@pytest.mark.parametrize("available_gb, total_gb, verdict", [
    (40, 48, FITS), (28, 48, CLOSE), (22, 23, CANNOT)])
def test_two_ranks_of_12_gb_fit_come_close_or_cannot(available_gb, total_gb, verdict):
    fit = judge(rank_need(GB, "sgd", "fp32"), 2, Machine(total_gb * GB, available_gb * GB))
    assert fit.all_ranks_bytes == 24 * GB and fit.verdict == verdict
    assert judge(rank_need(GB, "sgd", "fp32"), 2, None).verdict == FITS   # not read: no guess


def test_host_memory_reads_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683652 kB\nMemFree:  100 kB\n"
                       "MemAvailable:   24035196 kB\n")
    assert host_memory(str(meminfo)) == Machine(24683652 * 1024, 24035196 * 1024)
    assert host_memory(str(tmp_path / "missing")) is None


def test_a_preset_that_cannot_fit_is_refused_in_one_line_before_any_rank(
        tmp_path, capsys, monkeypatch):
    from realrun.cli import main as realrun_main
    from realrun.commands import profile as command
    monkeypatch.setattr(command, "host_memory", lambda: Machine(2**30, 2**30))
    out = tmp_path / "p.json"
    assert realrun_main(["profile", "--model", "transformer-small", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--world-size" in err and "Traceback" not in err
    assert not out.exists()


def test_the_plan_line_counts_the_steps_each_rank_will_take():
    from realrun.commands.profile import memory_fit, plan_line
    from realrun.launch.world import WorldConfig
    from realrun.profile_on_ranks import planned_steps
    from realrun.workload import Workload
    workload = Workload.preset(parse_model("mlp-8x1024"), 2, 8)
    args = argparse.Namespace(optimizer="sgd", precision="bf16", repeats=10, warmup=3)
    world = WorldConfig(world_size=2)
    planned = planned_steps(10, 3, 8, 2)
    line = plan_line(workload, world, args, planned, memory_fit(workload, world, args))
    assert line.count("\n") == 0 and "mlp-8x1024" in line and "8.39 M" in line
    assert f" {sum(planned.values())} steps" in line
    assert all(f"{name} {steps}" in line for name, steps in planned.items())


def test_rank_zero_refuses_your_model_once_built_when_it_cannot_fit():
    import torch

    from realrun.profile_on_ranks import _check_memory
    from realrun.workload import Workload
    model = torch.nn.Linear(1000, 1000, bias=False)        # 4 MB of weights: 12 MB a rank
    workload = Workload("mine:build", module="mine.py:build")
    ctx = SimpleNamespace(device=torch.device("cpu"), world_size=2, rank=0)
    payload = {"optimizer": "sgd", "precision": "fp32"}
    lines: list[str] = []
    with pytest.raises(InputError) as e:
        _check_memory(workload, model, payload, ctx, Machine(20 * 10**6, 20 * 10**6),
                      lines.append)
    assert "--world-size" in str(e.value) and len(lines) == 1
    lines.clear()
    _check_memory(workload, model, payload, ctx, Machine(10**9, 10**9), lines.append)
    assert len(lines) == 1                                   # the memory line, no warning


# -- the steps each phase plans are the steps it runs -----------------------------------------

@pytest.mark.slow
def test_each_phase_runs_the_steps_it_plans(capfd):
    from realrun.launch.world import WorldConfig
    from realrun.profile_on_ranks import planned_steps, profile_world
    from realrun.workload import Workload
    workload = Workload.preset(parse_model("ffn-2x8x16"), 1, 2)
    profile_world(workload, WorldConfig(world_size=1), repeats=2, warmup=1, host_turns=2,
                  progress={"quiet_s": 0.0, "every_s": 0.0})     # a line at every step
    planned = planned_steps(2, 1, 2, world_size=1)
    seen: dict[str, list[int]] = {}
    for done, total, phase in re.findall(r"(\d+)/(\d+) steps \(([^)]+)\)", capfd.readouterr().err):
        assert int(total) == sum(planned.values())
        seen.setdefault(phase, []).append(int(done))
    assert list(seen) == list(planned)
    end = 0
    for phase, steps in planned.items():
        end += steps
        assert seen[phase][-1] == end        # the phase's last step is its planned end
    assert all(b == a + 1 for counts in seen.values() for a, b in zip(counts, counts[1:]))

"""Who holds the CPUs while a backward launches all-reduces: the scheduler's trace beside it.

    python experiments/sched_bursts.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32 [--emulate-hosts 2 --link-gbit 2]

Why: where the ranks' training threads fill the CPUs, overlapped collectives progress far
slower than alone (simddp/cpu_share.py). This shows how, from the kernel's own record. Each
repeat on every rank, after a barrier each, three windows on the host's one clock:

- ``alone``: the model's forward + backward;
- ``hooks``: the same with a post-accumulate-grad hook per parameter that launches that
  gradient's all-reduce (per-parameter overlap, as a backward launches them), then waited;
- ``queued``: every gradient's all-reduce queued first, then forward + backward, then waited
  (the pattern of ``realrun profile``'s contention probe).

Meanwhile tracefs records the scheduler's switches and wake-ups and the softirqs (clock
``mono``: perf_counter's). For rank 0's windows it prints medians over repeats, for the
compute (start to the backward's end) and the drain after it (to the last completion): the
milliseconds of CPU, summed over all CPUs, each kind of thread held (``train``: the training
threads; ``worker``: Gloo's ``pt_gloo_runloop``; ``tcp``: ``gloo_tcp_loop``; ``idle``), the
softirq time (inside those), the all-reduces that completed, the stretches of 1 ms or more
in which no Gloo thread ran on any CPU (how many, their median), and the wake-ups of Gloo's
threads: how many, and how long the woken thread waited for a CPU (median, p90, share over
1 ms). Needs root (tracefs); one line and exit 2 otherwise. Numbers from this VM:
docs/results/2026-11-27-scheduler-bursts.md.
"""
from __future__ import annotations

import os
import re
import statistics
import sys
import threading
import time
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from experiments._model_run import model_run_args, run_ranks  # noqa: E402
from experiments.tcp_stalls import traced  # noqa: E402
from realrun.workload import Workload, forward, loss_of  # noqa: E402

EVENTS = ("sched/sched_switch", "sched/sched_waking", "irq/softirq_entry", "irq/softirq_exit")
WINDOWS = ("alone", "hooks", "queued")
KINDS = ("train", "worker", "tcp", "idle", "other")
_LINE = re.compile(r"^\s*.+?-(\d+)\s+\[(\d+)\]\s+\S+\s+(\d+\.\d+): (\w+): (.*)$")
_SWITCH = re.compile(r"prev_pid=(\d+) .*==> next_comm=(\S+) next_pid=(\d+)")
_WAKING = re.compile(r"pid=(\d+)")


def rank(payload: dict, ctx) -> dict:
    """This rank's training thread id and, per repeat and window, its clock stamps."""
    model, inputs, loss_fn = Workload(**payload["workload"]).build(payload["seed"], ctx.rank,
                                                                    torch.device("cpu"))
    params = [p for p in model.parameters() if p.requires_grad]
    state = {"launch": False, "futures": [], "ends": []}

    def stamp(_fut) -> None:
        state["ends"].append(time.perf_counter())

    def hook(p) -> None:
        if state["launch"]:
            state["futures"].append(dist.all_reduce(p.grad, async_op=True).get_future().then(stamp))
    for p in params:
        p.register_post_accumulate_grad_hook(hook)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss_of(forward(model, inputs), loss_fn).backward()
    grads = [torch.zeros_like(p) for p in params]
    for _ in range(3):
        step()
        for g in grads:
            dist.all_reduce(g)
    windows = []
    for _ in range(payload["repeats"]):
        for name in WINDOWS:
            ctx.barrier()
            state.update(futures=[], ends=[])
            start = time.perf_counter()
            if name == "queued":
                state["futures"] = [dist.all_reduce(g, async_op=True).get_future().then(stamp)
                                    for g in grads]
            state["launch"] = name == "hooks"
            step()
            compute_end = time.perf_counter()
            state["launch"] = False
            torch.futures.wait_all(state["futures"])
            windows.append({"name": name, "start": start, "compute_end": compute_end,
                            "ends": sorted(state["ends"])})
    ctx.barrier()
    return {"tid": threading.get_native_id(), "windows": windows}


def parse(lines: list[str]):
    """(who ran where: (cpu, pid, from, to); wake-ups: (woken at, ran at, pid, waker pid);
    softirqs: (from, to); thread names by pid) from the trace's lines::

        >>> ran, wakes, irqs, names = parse([
        ...     " python3-7 [000] d..2. 1.000000: sched_waking: comm=w pid=9 prio=120",
        ...     " python3-7 [000] d..2. 1.004000: sched_switch: prev_comm=python3 prev_pid=7 "
        ...     "prev_prio=120 prev_state=R ==> next_comm=w next_pid=9 next_prio=120",
        ...     " w-9 [000] d..2. 1.005000: sched_switch: prev_comm=w prev_pid=9 prev_prio=120 "
        ...     "prev_state=S ==> next_comm=python3 next_pid=7 next_prio=120"])
        >>> ran, wakes, names[9]
        ([(0, 9, 1.004, 1.005)], [(1.0, 1.004, 9, 7)], 'w')
    """
    ran, wakes, irqs, names = [], [], [], {}
    current: dict[int, tuple[int, float]] = {}
    waking: dict[int, tuple[float, int]] = {}
    irq_from: dict[int, float] = {}
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        pid, cpu, t, event, rest = int(m.group(1)), int(m.group(2)), float(m.group(3)), \
            m.group(4), m.group(5)
        if event == "sched_switch":
            s = _SWITCH.search(rest)
            nxt = int(s.group(3))
            names[nxt] = s.group(2)
            if cpu in current:
                ran.append((cpu, current[cpu][0], current[cpu][1], t))
            current[cpu] = (nxt, t)
            if nxt in waking:
                woken_s, waker = waking.pop(nxt)
                wakes.append((woken_s, t, nxt, waker))
        elif event == "sched_waking":
            waking.setdefault(int(_WAKING.search(rest).group(1)), (t, pid))
        elif event == "softirq_entry":
            irq_from[cpu] = t
        elif event == "softirq_exit" and cpu in irq_from:
            irqs.append((irq_from.pop(cpu), t))
    return ran, wakes, irqs, names


def kind_of(pid: int, names: dict, train: set) -> str:
    """Which of :data:`KINDS` a thread is."""
    if pid in train:
        return "train"
    name = names.get(pid, "")
    for prefix, kind in (("pt_gloo", "worker"), ("gloo_tcp", "tcp"), ("swapper", "idle")):
        if name.startswith(prefix):
            return kind
    return "other"


def overlap_s(a: float, b: float, t0: float, t1: float) -> float:
    return max(0.0, min(b, t1) - max(a, t0))


def part(a: float, b: float, ends: list[float], trace, train: set) -> dict:
    """One stretch [a, b): CPU ms by kind, softirq ms, completions, Gloo's wake-ups."""
    ran, wakes, irqs, names = trace
    out = dict.fromkeys(KINDS, 0.0)
    gloo = []   # the stretches Gloo's threads ran, clipped to [a, b)
    for _, pid, t0, t1 in ran:
        inside_s, kind = overlap_s(a, b, t0, t1), kind_of(pid, names, train)
        out[kind] += inside_s * 1e3
        if inside_s > 0 and kind in ("worker", "tcp"):
            gloo.append((max(a, t0), min(b, t1)))
    out["softirq"] = sum(overlap_s(a, b, t0, t1) for t0, t1 in irqs) * 1e3
    out["done"] = sum(a <= t < b for t in ends)
    gaps, edge = [], a   # stretches in which no Gloo thread ran on any CPU
    for t0, t1 in sorted(gloo):
        if t0 - edge >= 1e-3:
            gaps.append(t0 - edge)
        edge = max(edge, t1)
    out["gaps_over_1ms"] = len(gaps)
    out["gap_med_ms"] = statistics.median(gaps) * 1e3 if gaps else 0.0
    waits = sorted(t1 - t0 for t0, t1, pid, _ in wakes
                   if a <= t0 < b and kind_of(pid, names, train) in ("worker", "tcp"))
    out["wakes"] = len(waits)
    if waits:
        out["wait_med_us"] = statistics.median(waits) * 1e6
        out["wait_p90_us"] = waits[int(0.9 * (len(waits) - 1))] * 1e6
        out["wait_over_1ms_pct"] = 100.0 * sum(w > 1e-3 for w in waits) / len(waits)
    return out


def main() -> None:
    args, _, payload = model_run_args("sched_bursts", __doc__, {"repeats": 6})
    (ranks, load), lines = traced(lambda: run_ranks("sched_bursts", args, payload),
                                  EVENTS, "sched_bursts")
    trace = parse(lines)
    train = {r["tid"] for r in ranks}
    cpus = len(os.sched_getaffinity(0))
    print(f"# {args.repeats} repeats, {len(ranks)} ranks, CPUs {cpus}, load "
          f"{load:.2f} -> {os.getloadavg()[0]:.2f}; rank 0's windows, medians over repeats; "
          "CPU ms summed over all CPUs")
    for name in WINDOWS:
        rows = defaultdict(list)
        for w in (w for w in ranks[0]["windows"] if w["name"] == name):
            last = max(w["ends"] + [w["compute_end"]])   # all may end inside the compute
            for label, (a, b) in (("compute", (w["start"], w["compute_end"])),
                                  ("drain", (w["compute_end"], last))):
                rows[label + " ms"].append((b - a) * 1e3)
                for key, value in part(a, b, w["ends"], trace, train).items():
                    rows[f"{label} {key}"].append(value)
        for label in ("compute", "drain"):
            if name == "alone" and label == "drain":
                continue
            cells = [f"{key.split(' ', 1)[1]} {statistics.median(v):.1f}"
                     for key, v in rows.items() if key.startswith(label)]
            print(f"{name:>6} {label:>7}: " + ", ".join(cells))


if __name__ == "__main__":
    main()

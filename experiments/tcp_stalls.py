"""Where a waited-for all-reduce's slow calls wait: the model's chain beside the kernel's trace.

    python experiments/tcp_stalls.py --model transformer-small --layers 8 --d-model 128 --d-ff 512 \
        --heads 4 --vocab 1024 --batch 2 --seq 32 --emulate-hosts 2 --link-gbit 2 [--cc bbr]

Each repeat on every rank: a barrier, 20 ms of matmuls, then one waited-for all-reduce per
gradient of the model (a naive step's chain), each call stamped on the host's one clock
(perf_counter: CLOCK_MONOTONIC). Meanwhile the kernel traces every packet a device sends or
receives, TCP's retransmissions and the high-resolution timers that fire (tracefs, clock
``mono``: the same clock). For each call over ``--slow-ms`` it finds the longest stretch in
which nothing happened and names the event that ended it: ``tcp_pace_kick`` is TCP's pacing
timer (the flow waited for its pacing rate, with the link idle), ``netif_rx`` a packet
(someone sent late: a rank not scheduled). ``--cc NAME`` runs the emulated hosts' TCP on
another congestion control than realrun's cubic (realrun/launch/host_stack.py), to see what
the box's own choice does. Needs root (tracefs); one line and exit 2 otherwise. Numbers from
this VM: docs/results/2026-11-26-pacing-stalls.md.
"""
from __future__ import annotations

import os
import re
import statistics
import sys
import time
from bisect import bisect_left
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from experiments._model_run import model_run_args, run_ranks  # noqa: E402
from calibrate.ranks.sequence import BUSY_S, busy  # noqa: E402
from realrun.launch import host_stack  # noqa: E402

TRACEFS = "/sys/kernel/tracing"
EVENTS = ("tcp/tcp_retransmit_skb", "net/net_dev_xmit", "net/netif_receive_skb",
          "net/netif_rx", "timer/hrtimer_expire_entry")
# Timers that fire whether or not the network waits: the tick, and threads' poll timeouts.
QUIET_TIMERS = ("tick_nohz_handler", "hrtimer_wakeup")
_LINE = re.compile(r"^\s*\S+\s+\[\d+\]\s+\S+\s+(\d+\.\d+): (\w+): (.*)$")


def rank(payload: dict, ctx) -> list:
    """Per repeat, each call's [start, seconds] on this rank's perf_counter."""
    tensors = [torch.zeros(n // 4) for n in payload["sizes"]]
    for t in tensors:
        dist.all_reduce(t)
    out = []
    for _ in range(payload["repeats"]):
        ctx.barrier()
        busy(BUSY_S, ctx)
        calls = []
        for t in tensors:
            start = time.perf_counter()
            dist.all_reduce(t)
            calls.append([start, time.perf_counter() - start])
        out.append(calls)
    return out


def _write(name: str, value: str) -> None:
    with open(os.path.join(TRACEFS, name), "w") as handle:
        handle.write(value)


def traced(fn, events=EVENTS, prog="tcp_stalls"):
    """``fn()``'s value and the trace's lines, ``events`` on (tracefs names, "group/event")."""
    if not os.path.isdir(os.path.join(TRACEFS, "events")):
        os.system(f"mount -t tracefs nodev {TRACEFS} 2>/dev/null")
    try:
        with open(os.path.join(TRACEFS, "buffer_size_kb")) as handle:
            before_kb = handle.read().split()[0]   # "7 (expanded: 1408)" before first use
        _write("tracing_on", "0")
        _write("trace", "")
        _write("trace_clock", "mono")
        _write("buffer_size_kb", "131072")   # per CPU; ~500k events for 40 repeats
        for event in events:
            _write(f"events/{event}/enable", "1")
    except OSError as e:
        print(f"{prog}: cannot trace ({e}); it needs root and tracefs", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        _write("tracing_on", "1")
        value = fn()
        _write("tracing_on", "0")
        with open(os.path.join(TRACEFS, "trace")) as handle:
            lines = handle.readlines()
    finally:   # also when fn fails: tracing off, and the kernel's 2 x 128 MB given back
        _write("tracing_on", "0")
        for event in events:
            _write(f"events/{event}/enable", "0")
        _write("trace", "")
        _write("buffer_size_kb", before_kb)
    return value, lines


def events(lines: list[str]) -> list[tuple[float, str]]:
    """(time s, name) of each traced event, a timer named by its function; quiet timers out."""
    out = []
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        name = m.group(2)
        if name == "hrtimer_expire_entry":
            fn = re.search(r"function=(\w+)", m.group(3))
            name = fn.group(1) if fn else name
            if name in QUIET_TIMERS:
                continue
        out.append((float(m.group(1)), name))
    return sorted(out)


def available_congestion_controls() -> list[str]:
    """The congestion controls this kernel offers (its loaded modules); [] where unknown."""
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as handle:
            return handle.read().split()
    except OSError:
        return []


def main() -> None:
    args, workload, payload = model_run_args("tcp_stalls", __doc__, {"repeats": 40},
                                             {"slow-ms": "8", "cc": host_stack.CONGESTION_CONTROL})
    try:
        slow_s = float(args.slow_ms) / 1e3
        if not slow_s > 0:
            raise ValueError
    except ValueError:
        print(f"tcp_stalls: --slow-ms must be milliseconds > 0, got {args.slow_ms!r}",
              file=sys.stderr)
        raise SystemExit(2) from None
    known = available_congestion_controls()
    if known and args.cc not in known:
        print(f"tcp_stalls: --cc {args.cc!r} is not a congestion control this kernel has loaded "
              f"({', '.join(known)})", file=sys.stderr)
        raise SystemExit(2)
    host_stack.CONGESTION_CONTROL = args.cc   # read when the emulated hosts are built
    model = workload.build(0, 0, torch.device("cpu"))[0]
    sizes = [p.numel() * 4 for p in reversed(list(model.parameters())) if p.requires_grad]
    payload["sizes"] = sizes
    (ranks, load), lines = traced(lambda: run_ranks("tcp_stalls", args, payload))
    trace = events(lines)
    stamps = [t for t, _ in trace]
    calls = [(rep[j][0], max(r[i][j][1] for r in ranks), j)   # rank 0's start, the slower's time
             for i, rep in enumerate(ranks[0]) for j in range(len(sizes))]
    chains = [sum(max(r[i][j][1] for r in ranks) for j in range(len(sizes)))
              for i in range(len(ranks[0]))]
    print(f"# {len(sizes)} waited-for all-reduces a repeat, {len(chains)} repeats; TCP {args.cc};"
          f" load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"chain: median {statistics.median(chains) * 1e3:.1f} ms, "
          f"max {max(chains) * 1e3:.1f} ms; calls over {args.slow_ms} ms: "
          f"{sum(s > slow_s for _, s, _ in calls)} of {len(calls)}, over 20 ms: "
          f"{sum(s > 0.020 for _, s, _ in calls)}")
    ended: Counter = Counter()
    gaps: dict[str, list[float]] = {}
    for start, seconds, j in calls:
        if seconds <= slow_s:
            continue
        inside = trace[bisect_left(stamps, start):bisect_left(stamps, start + seconds)]
        times = [start] + [t for t, _ in inside] + [start + seconds]
        widths = [b - a for a, b in zip(times, times[1:])]
        k = max(range(len(widths)), key=widths.__getitem__)
        name = inside[k][1] if k < len(inside) else "(the call's end)"
        ended[name] += 1
        gaps.setdefault(name, []).append(widths[k] * 1e3)
    for name, count in ended.most_common():
        ms = sorted(gaps[name])
        print(f"  longest silence ended by {name:>18}: {count:3d} calls, "
              f"{ms[0]:.1f} … {ms[-1]:.1f} ms (median {statistics.median(ms):.1f})")
    kicks = [i for i, (_, name) in enumerate(trace) if name == "tcp_pace_kick" and i > 0]
    waits = [trace[i][0] - trace[i - 1][0] for i in kicks]
    print(f"pacing timer: {len(kicks)} wake-ups, {sum(w > 0.002 for w in waits)} after a "
          f"silence over 2 ms (longest {max(waits, default=0) * 1e3:.1f} ms); "
          f"retransmissions: {sum(name == 'tcp_retransmit_skb' for _, name in trace)}")


if __name__ == "__main__":
    main()

"""What each emulated host's network stack runs, as a cluster host's would: its NIC keeps a
flow in order, and its TCP uses Linux's default congestion control, whatever this box uses.

**Flow steering.** A veth queues each packet on the backlog of the CPU that sent it, and a
flow's segments leave from both vCPUs, so they could arrive out of order, which TCP takes for
loss (spurious retransmits, a smaller window). A NIC keeps a flow in order; with receive
packet steering (RPS) each flow is handled on one CPU. In a stretch with reordering, naive
beside ddp on the transformer at 2 Gbit/s took 182-184 ms a step against 109-110 ms steered
(docs/results/2026-11-26-cpu-bound-collectives.md, section 5).

**One CPU per host** (:func:`host_cpus`). RPS over all CPUs hashes each flow, by its random
ports, to one of them: every launch drew another placement of the flows' receive work, and
its own speed. FSDP2's 225 waited-for collectives on the transformer at 2 Gbit/s took
104-182 ms over 12 launches (fsdp's step 292-412 ms), a regime per launch, steady within it;
a prediction built from one launch (calibrate, the profile) missed another by up to 30 %.
With host i's NIC and switch port steered to CPU i (mod the CPUs), as a cluster host's NIC
is served by its own cores, they took 138-158 ms over 8 launches (fsdp 312-339 ms; all hosts
on one CPU: 100-117 over 11). ``python bench/steer_regimes.py``;
docs/results/2026-11-27-steering-regimes.md.

**Congestion control.** A namespace inherits the box's default, and this project's VMs set
``bbr``, which paces every flow by its own bandwidth estimate. Between the bursts of waited-for
all-reduces that estimate is sometimes far below the link's: the next 64 KiB segment waits
for the pacing timer (``tcp_pace_kick``) up to 43 ms with the link idle, and a 256 KiB
all-reduce took 40-70 ms instead of ~1 ms (90 of 5661 pacing wake-ups after a silent gap over
2 ms; kernel trace, docs/results/2026-11-26-pacing-stalls.md). With ``cubic``, Linux's
default and what a cluster's hosts run unless tuned, nothing paces and no call took over
20 ms. So each host namespace runs :data:`CONGESTION_CONTROL`.

The functions build the shell lines; realrun/launch/netns.py runs them in each namespace,
each on its own: where a kernel refuses one (an H100 host's Firecracker kernel answered one
of a host's two writes with `echo: I/O error`, 2026-11-26), the cluster still comes up and
says once what it runs without and what that risks (:data:`WITHOUT`)::

    >>> cpu_mask({0, 1}), cpu_mask(set(range(40))), cpu_mask({33})
    ('3', 'ff,ffffffff', '2,00000000')
    >>> [host_cpus(i, {4, 6}) for i in range(3)]
    [{4}, {6}, {4}]
"""
from __future__ import annotations

CONGESTION_CONTROL = "cubic"  # Linux's default since 2.6.19
CC_SYSCTL = "/proc/sys/net/ipv4/tcp_congestion_control"   # per network namespace
STEER, CONGESTION = "flow steering (RPS)", "their own TCP congestion control"
# What each step's absence risks, for the warning when a kernel refuses it.
WITHOUT = {STEER: "a flow's segments may arrive out of order and be retransmitted",
           CONGESTION: "the box's own congestion control runs, and bbr's pacing stalled "
                       "waited-for all-reduces for 40-70 ms"}


def cpu_mask(cpus: set[int]) -> str:
    """The CPUs as sysfs writes a mask: hex, a comma between each 32 bits."""
    digits = f"{sum(1 << c for c in cpus):x}"
    head = len(digits) % 8 or 8
    return ",".join([digits[:head]] + [digits[i:i + 8] for i in range(head, len(digits), 8)])


def host_cpus(index: int, cpus: set[int]) -> set[int]:
    """The CPU host ``index``'s NIC and switch port steer flows to: one per host, round
    the CPUs this process may use (a fixed placement, not a random one per launch)."""
    ordered = sorted(cpus)
    return {ordered[index % len(ordered)]}


def steer_script(dev: str, cpus: set[int]) -> str:
    """RPS to ``cpus`` on each of ``dev``'s receive queues. sysfs shows a namespace's
    devices only where it is mounted for it, as `ip netns exec` does."""
    return (f"for q in /sys/class/net/{dev}/queues/rx-*/rps_cpus; "
            f"do echo {cpu_mask(cpus)} > $q || exit 1; done")


def congestion_control() -> str:
    """The congestion control this process's TCP sockets get (its network namespace's
    default: :data:`CONGESTION_CONTROL` on realrun's emulated hosts), "" where Linux does
    not say. calibrate's link file records it (calibrate/ranks/run.py)."""
    try:
        with open(CC_SYSCTL) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def congestion_script() -> str:
    """The namespace's TCP on :data:`CONGESTION_CONTROL`, written only where it differs.

    >>> congestion_script().split(" || ")[1]
    'echo cubic > /proc/sys/net/ipv4/tcp_congestion_control'
    """
    return (f'[ "$(cat {CC_SYSCTL})" = {CONGESTION_CONTROL} ] || '
            f"echo {CONGESTION_CONTROL} > {CC_SYSCTL}")


def host_steps(dev: str, cpus: set[int]) -> list[tuple[str, str]]:
    """(what, shell line) for a host: its NIC ``dev`` steered by flow, its TCP on
    :data:`CONGESTION_CONTROL`. The switch's ports get the :data:`STEER` step alone."""
    return [(STEER, steer_script(dev, cpus)), (CONGESTION, congestion_script())]

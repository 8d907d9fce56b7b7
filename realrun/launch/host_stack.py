"""What each emulated host's network stack runs, as a cluster host's would: its NIC keeps a
flow in order, and its TCP uses Linux's default congestion control, whatever this box uses.

**Flow steering.** A veth queues each packet on the backlog of the CPU that sent it, and a
flow's segments leave from both vCPUs, so they could arrive out of order, which TCP takes for
loss (spurious retransmits, a smaller window). A NIC keeps a flow in order; with receive
packet steering (RPS) each flow is handled on one CPU, and reordering no longer slows the
waited-for calls (docs/FINDINGS.md#receive-steering-on-emulated-hosts).

**One CPU per host** (:func:`host_cpus`). RPS over all CPUs hashes each flow, by its random
ports, to one of them: every launch drew another placement of the flows' receive work, and
its own speed, a regime per launch, steady within it, so a prediction built from one launch
(calibrate, the profile) missed another. With host i's NIC and switch port steered to CPU i
(mod the CPUs), as a cluster host's NIC is served by its own cores, the launches agree
(docs/FINDINGS.md#receive-steering-on-emulated-hosts).

**Congestion control.** A namespace inherits the box's default, and this project's VMs set
``bbr``, which paces every flow by its own bandwidth estimate. Between the bursts of waited-for
all-reduces that estimate is sometimes far below the link's: the next segment waits for the
pacing timer (``tcp_pace_kick``) with the link idle, and a small all-reduce stalls for tens
of ms (docs/FINDINGS.md#pacing-bbr-against-cubic). With ``cubic``, Linux's default and what
a cluster's hosts run unless tuned, nothing paces. So each host's routes carry
:data:`CONGESTION_CONTROL` (``congctl``): its subnet's, for the flows to other hosts, and its
own address's, for those between its ranks. Not the namespace's default: a namespace may only
pick one of the box's ``tcp_allowed_congestion_control``; where that lacks cubic (it can read
"reno bbr") the write answers `I/O error` and the hosts run bbr
(docs/FINDINGS.md#pacing-bbr-against-cubic). A route's ``congctl`` is not limited so. The
ranks learn what their flows run from :data:`TCP_ENV` (:func:`congestion_control`).

The functions build the shell lines; realrun/launch/netns.py runs them in each namespace,
each on its own: where a kernel refuses one (a Firecracker guest kernel can answer one of a
host's two writes with `echo: I/O error`), the cluster still comes up and
says once what it runs without and what that risks (:data:`WITHOUT`)::

    >>> cpu_mask({0, 1}), cpu_mask(set(range(40))), cpu_mask({33})
    ('3', 'ff,ffffffff', '2,00000000')
    >>> [host_cpus(i, {4, 6}) for i in range(3)]
    [{4}, {6}, {4}]
"""
from __future__ import annotations

import ipaddress
import os

CONGESTION_CONTROL = "cubic"  # Linux's default since 2.6.19
CC_SYSCTL = "/proc/sys/net/ipv4/tcp_congestion_control"   # per network namespace
TCP_ENV = "REALRUN_TCP_CONGESTION"  # set by an emulated cluster whose hosts' routes carry one
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
    """The congestion control this process's TCP sockets get: on realrun's emulated hosts
    :data:`TCP_ENV` (their routes', :data:`CONGESTION_CONTROL`), else its network
    namespace's default; "" where Linux does not say. calibrate's link file records it
    (calibrate/ranks/run.py)."""
    if os.environ.get(TCP_ENV):
        return os.environ[TCP_ENV]
    try:
        with open(CC_SYSCTL) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def congestion_script(dev: str, interface: str) -> str:
    """The routes of a host with ``interface`` (address/prefix) on ``dev`` carrying
    :data:`CONGESTION_CONTROL`: the subnet's, and the address's own in the local table.

    >>> subnet, own = congestion_script("veth0", "10.64.0.1/24").split(" && ")
    >>> subnet
    'ip route replace 10.64.0.0/24 dev veth0 proto kernel scope link src 10.64.0.1 congctl cubic'
    >>> own.split(" dev ")[0], own.split(" src ")[1]
    ('ip route replace table local local 10.64.0.1', '10.64.0.1 congctl cubic')
    """
    iface = ipaddress.ip_interface(interface)
    ip, cc = iface.ip, CONGESTION_CONTROL
    return (f"ip route replace {iface.network} dev {dev} proto kernel scope link src {ip} "
            f"congctl {cc} && ip route replace table local local {ip} dev {dev} proto kernel "
            f"scope host src {ip} congctl {cc}")


def host_steps(dev: str, interface: str, cpus: set[int]) -> list[tuple[str, str]]:
    """(what, shell line) for a host: its NIC ``dev`` (``interface``: address/prefix)
    steered by flow, its TCP on :data:`CONGESTION_CONTROL`. The switch's ports get the
    :data:`STEER` step alone."""
    return [(STEER, steer_script(dev, cpus)), (CONGESTION, congestion_script(dev, interface))]

"""What each emulated host's network stack runs, as a cluster host's would: its NIC keeps a
flow in order, and its TCP uses Linux's default congestion control, whatever this box uses.

- **Flow steering**: a veth queues each packet on the sending CPU's backlog, so a flow's
  segments could arrive out of order; receive packet steering (RPS) keeps a flow on one CPU,
  and host i's NIC and switch port on CPU i (:func:`host_cpus`), so every launch gets the same
  placement (docs/FINDINGS.md#receive-steering-on-emulated-hosts).
- **Congestion control**: this box's bbr paced waited-for all-reduces into stalls of tens of
  ms (docs/FINDINGS.md#pacing-bbr-against-cubic); each host's routes carry
  :data:`CONGESTION_CONTROL` (``congctl``), which no namespace's allowed list limits. The
  ranks learn it from :data:`TCP_ENV`.

realrun/launch/netns.py runs each shell line on its own: where a kernel refuses one, the
cluster comes up anyway and says once what it runs without (:data:`WITHOUT`)::

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
    """The CPU host ``index``'s NIC and switch port steer flows to: one per host, in turn."""
    ordered = sorted(cpus)
    return {ordered[index % len(ordered)]}


def steer_script(dev: str, cpus: set[int]) -> str:
    """RPS to ``cpus`` on each of ``dev``'s receive queues (run under `ip netns exec`, which
    mounts the namespace's sysfs)."""
    return (f"for q in /sys/class/net/{dev}/queues/rx-*/rps_cpus; "
            f"do echo {cpu_mask(cpus)} > $q || exit 1; done")


def congestion_control() -> str:
    """The congestion control this process's TCP sockets get: :data:`TCP_ENV` on emulated
    hosts, else the namespace's default; "" where Linux does not say."""
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
    """(what, shell line) for a host's NIC ``dev``: flow steering and congestion control
    (the switch's ports get the :data:`STEER` step alone)."""
    return [(STEER, steer_script(dev, cpus)), (CONGESTION, congestion_script(dev, interface))]

"""Whether the emulated link held segments back: TCP's needless loss probes between its hosts.

On this project's 2-vCPU VM (kernel 6.18), the tbf that shapes each emulated host's NIC
(realrun/launch/netns.py) sometimes keeps a queued segment until the sender's next one. A
waited-for all-reduce of 64 KiB-1 MiB has no next one: its sender's TCP fires a loss probe
after about two round trips, 40-70 ms, the held segment and the probe both arrive, and the
peer reports the duplicate (a DSACK). The transformer's 75 waited-for all-reduces took 172 ms
shaped at 2 Gbit/s, 71 ms in the same namespaces unshaped; a run with 18 loss probes had 18
DSACKs and no drop (docs/results/2026-11-26-uncapped-alpha.md, section 3). A NIC does not do
this, so a run whose emulated hosts sent needless probes says so, beside its results.

Each namespace's counters start at zero, so what is read before teardown is the run's::

    >>> text = "TcpExt: TCPLossProbes TCPDSACKRecv\\nTcpExt: 18 18\\nIpExt: InOctets\\nIpExt: 9\\n"
    >>> counters = parse_netstat(text); counters
    {'TCPLossProbes': 18, 'TCPDSACKRecv': 18, 'InOctets': 9}
    >>> print(stall_note([counters]))
    note: emulated link: TCP sent 18 loss probes between the hosts, 18 needlessly (the peer had the segment): the shaper held segments back until then, tens of ms each; waited-for collectives of 64 KiB-1 MiB include those stalls (docs/REALRUN.md)
    >>> stall_note([{"TCPLossProbes": 3, "TCPDSACKRecv": 0}]) is None   # probes for real losses
    True
"""
from __future__ import annotations

import subprocess
import sys

from realrun.launch.netns import Cluster


def parse_netstat(text: str) -> dict[str, int]:
    """``/proc/net/netstat`` as {counter: value}: its lines come in pairs, names then values,
    each starting with the same prefix (``TcpExt:``, ``IpExt:``, ...)."""
    counters: dict[str, int] = {}
    lines = text.splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        for name, value in zip(names.split()[1:], values.split()[1:]):
            counters[name] = int(value)
    return counters


def host_counters(cluster: Cluster) -> list[dict[str, int]]:
    """Each emulated host's TCP counters, read inside its namespace."""
    out = []
    for host in cluster.hosts:
        done = subprocess.run(["ip", "netns", "exec", host.netns, "cat", "/proc/net/netstat"],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              check=True, timeout=10)
        out.append(parse_netstat(done.stdout))
    return out


def stall_note(per_host: list[dict[str, int]]) -> str | None:
    """One line when the hosts' TCP sent loss probes the peer did not need (each answered
    by a DSACK); None otherwise."""
    probes = sum(c.get("TCPLossProbes", 0) for c in per_host)
    needless = min(probes, sum(c.get("TCPDSACKRecv", 0) for c in per_host))
    if needless == 0:
        return None
    return (f"note: emulated link: TCP sent {probes} loss probes between the hosts, {needless} "
            "needlessly (the peer had the segment): the shaper held segments back until then, "
            "tens of ms each; waited-for collectives of 64 KiB-1 MiB include those stalls "
            "(docs/REALRUN.md)")


def report_stalls(cluster: Cluster, stream=None) -> None:
    """Print :func:`stall_note` for ``cluster`` to ``stream`` (stderr), before its namespaces
    go; nothing for unshaped namespaces. A diagnostic: if the counters cannot be read, it
    says nothing rather than fail a run that finished."""
    if cluster.link_gbit is None:
        return
    try:
        note = stall_note(host_counters(cluster))
    except (OSError, subprocess.SubprocessError, ValueError):
        return
    if note:
        print(note, file=stream or sys.stderr, flush=True)

"""realrun.launch.link_health: the emulated link's needless TCP loss probes, read and said.

    python -m pytest tests/realrun/test_link_health.py -q
"""
from __future__ import annotations

import subprocess

import pytest

from realrun.launch import link_health, netns
from realrun.launch.errors import NetnsUnavailable

NETSTAT = """\
TcpExt: SyncookiesSent TCPLossProbes TCPLossProbeRecovery TCPDSACKRecv
TcpExt: 0 7 0 5
IpExt: InNoRoutes InOctets
IpExt: 0 123456
"""


def test_netstat_pairs_of_lines_become_counters():
    counters = link_health.parse_netstat(NETSTAT)
    assert counters["TCPLossProbes"] == 7 and counters["TCPDSACKRecv"] == 5
    assert counters["InOctets"] == 123456
    assert link_health.parse_netstat("") == {}


def test_the_note_counts_probes_over_hosts_and_only_the_needless_ones():
    note = link_health.stall_note([{"TCPLossProbes": 7, "TCPDSACKRecv": 5},
                                   {"TCPLossProbes": 2, "TCPDSACKRecv": 2}])
    assert note.startswith("note: emulated link: TCP sent 9 loss probes between the hosts, "
                           "7 needlessly")
    assert "\n" not in note
    assert link_health.stall_note([{"TCPLossProbes": 4}, {}]) is None   # no DSACK: real losses
    assert link_health.stall_note([{}, {}]) is None


def test_unreadable_counters_say_nothing(capsys, monkeypatch):
    # a diagnostic never fails a run that finished
    def fail(*args, **kwargs):
        raise subprocess.CalledProcessError(1, "ip")
    monkeypatch.setattr(link_health.subprocess, "run", fail)
    host = netns.Host("simddp-0-gone-h0", "10.0.0.1", "veth0")
    link_health.report_stalls(netns.Cluster((host,), "simddp-0-gone-hub", 2.0))
    link_health.report_stalls(netns.Cluster((host,), "simddp-0-gone-hub", None))   # unshaped
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_counters_are_read_inside_each_host(capsys):
    try:
        netns.check_available()
        with netns.emulated_cluster(2, link_gbit=2.0) as cluster:
            per_host = link_health.host_counters(cluster)
            link_health.report_stalls(cluster)
    except NetnsUnavailable as e:
        pytest.skip(str(e))
    assert len(per_host) == 2
    # fresh namespaces that carried no traffic: their TCP counters start at zero
    assert all(c["TCPLossProbes"] == 0 and c["TCPDSACKRecv"] == 0 for c in per_host)
    assert capsys.readouterr().err == ""

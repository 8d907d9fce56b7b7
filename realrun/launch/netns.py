"""An emulated multi-host cluster on one Linux box: one network namespace per host.

    from realrun.launch.netns import emulated_cluster
    with emulated_cluster(n_hosts=2, link_gbit=1.0) as cluster:
        host = cluster.hosts[1]                 # .netns, .ip, .ifname
        argv = cluster.exec_argv(1, [sys.executable, "-c", "print('hello from host 1')"])
        subprocess.run(argv, env={**os.environ, **cluster.env(1)}, check=True)

The picture: every host has one NIC (a veth) cabled to a switch (a Linux bridge) that lives in
a hub namespace of its own, so the root namespace gets no interfaces, routes or addresses.

    host 0 ns: lo, veth0 10.x.y.1/24 ── port0 (tbf R) ──┐
    host 1 ns: lo, veth1 10.x.y.2/24 ── port1 (tbf R) ──┼── br0 (hub ns)
    ...                                                 ┘

Each switch port's egress, toward its host, is shaped to `link_gbit` by tbf, so a ring
collective sees a full-duplex link of R per host. The shaper sits in the hub, where a segment
has left its socket, not on the sender's NIC, where TCP waited on it
(docs/FINDINGS.md#receive-steering-on-emulated-hosts). Each host's stack runs as a cluster
host's would (realrun/launch/host_stack.py). Needs root and iproute2 (NetnsUnavailable says
why not). Namespaces are named `simddp-<pid>-<random>-...`; those of a dead pid are removed by
the next cluster.
"""
from __future__ import annotations

import ctypes
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from realrun.launch import host_stack
from realrun.launch.errors import NetnsUnavailable, one_line
from realrun.launch.supervise import pid_alive, sigterm_as_interrupt

PREFIX = "simddp"
_NETNS_DIR = "/run/netns"  # where `ip netns add` bind-mounts named namespaces
# `ip netns exec` mounts /etc/netns/NAME/hosts over /etc/hosts: naming the hosts there spares
# c10d's reverse lookups a warning on every connection.
_NETNS_ETC_DIR = "/etc/netns"
_CLONE_NEWNET = 0x40000000  # from <sched.h>; setns() needs it to enter a network namespace
_MAX_HOSTS = 250  # addresses .1 to .250 of the per-run /24
# tbf's queue in seconds of traffic: no drops in a bulk all-reduce, no long delay behind it.
_TBF_LATENCY_S = 0.020
# Token bucket depth: at least two 64 KiB GSO packets, which veth hands tbf whole; 1 ms of
# traffic covers timer jitter, and a deeper one would let small collectives beat the rate
# (docs/FINDINGS.md#token-bucket).
_TBF_BURST_S = 0.001
_TBF_MIN_BURST_BYTES = 2 * 65536  # two 64 KiB GSO packets


@dataclass(frozen=True)
class Host:
    """One emulated host: its namespace, its address and the name of its NIC inside it."""

    netns: str
    ip: str
    ifname: str


@dataclass(frozen=True)
class Cluster:
    """Hosts of an emulated cluster joined by a bridge in `hub_netns`; link_gbit None = unshaped."""

    hosts: tuple[Host, ...]
    hub_netns: str
    link_gbit: float | None
    tcp: str = ""   # the hosts' routes' congestion control; "" where a kernel refused it

    def exec_argv(self, host_index: int, argv: list[str]) -> list[str]:
        """The command line that runs `argv` inside host `host_index` (ip netns exec execs it,
        so the returned process id is the program's own)."""
        return ["ip", "netns", "exec", self.hosts[host_index].netns, *argv]

    def env(self, host_index: int) -> dict[str, str]:
        """Environment that makes gloo / NCCL talk over this host's NIC and only over it."""
        ifname = self.hosts[host_index].ifname
        return {
            **({host_stack.TCP_ENV: self.tcp} if self.tcp else {}),  # what its flows run
            "GLOO_SOCKET_IFNAME": ifname,
            "NCCL_SOCKET_IFNAME": ifname,
            # Without these NCCL would move data through shared memory, NVLink or InfiniBand
            # between "hosts" on one box, bypassing the shaped link.
            "NCCL_SHM_DISABLE": "1",
            "NCCL_P2P_DISABLE": "1",
            "NCCL_IB_DISABLE": "1",
        }

    def free_port(self, host_index: int) -> int:
        """A TCP port free on host `host_index`'s address (binds port 0 inside its namespace)."""
        host = self.hosts[host_index]
        return _in_netns(host.netns, lambda: bind_free_port(host.ip))


def tbf_args(link_gbit: float) -> list[str]:
    """`tc qdisc add dev X root` arguments that shape egress to `link_gbit` (see the constants)."""
    if not link_gbit > 0:
        raise ValueError(f"link_gbit={link_gbit!r}: must be a rate in gbit/s > 0, e.g. 1.0")
    latency_ms = _TBF_LATENCY_S * 1e3
    return ["tbf", "rate", f"{link_gbit * 1e3:g}mbit", "burst", str(tbf_burst_bytes(link_gbit)),
            "latency", f"{latency_ms:g}ms"]


def tbf_burst_bytes(link_gbit: float) -> int:
    """The token bucket tbf shapes with, in bytes: what a port passes at memory speed after an
    idle millisecond; calibrate writes it as ``GlooHost.burst_bytes``."""
    return max(_TBF_MIN_BURST_BYTES, int(link_gbit * 1e9 / 8 * _TBF_BURST_S))


def check_available() -> None:
    """Raise NetnsUnavailable naming the reason if this process can't build a cluster."""
    if not sys.platform.startswith("linux"):
        raise NetnsUnavailable(f"network namespaces need Linux; this is {sys.platform}")
    if os.geteuid() != 0:
        raise NetnsUnavailable(f"network namespaces need root; running as uid {os.geteuid()}")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NetnsUnavailable(f"`{tool}` not found on PATH; install iproute2")


@contextmanager
def emulated_cluster(n_hosts: int, link_gbit: float | None = None) -> Iterator[Cluster]:
    """Build `n_hosts` namespaces on a bridge, shaped to `link_gbit`; always delete them on exit."""
    if not isinstance(n_hosts, int) or not 1 <= n_hosts <= _MAX_HOSTS:
        raise ValueError(f"n_hosts={n_hosts!r}: must be an int from 1 to {_MAX_HOSTS}")
    qdisc = tbf_args(link_gbit) if link_gbit is not None else None
    check_available()
    remove_stale_namespaces()
    stem = f"{PREFIX}-{os.getpid()}-{secrets.token_hex(3)}"
    # a random /24 per run keeps clusters side by side apart in logs and captures
    subnet = f"10.{random.randint(64, 127)}.{random.randint(0, 255)}"
    hub = f"{stem}-hub"
    hosts = tuple(Host(f"{stem}-h{i}", f"{subnet}.{i + 1}", f"veth{i}") for i in range(n_hosts))
    created: list[str] = []
    with sigterm_as_interrupt():
        try:
            tcp = _build(hub, hosts, qdisc, created)
            yield Cluster(hosts, hub, link_gbit, tcp)
        finally:
            for name in reversed(created):
                _delete_netns(name)


def remove_stale_namespaces() -> list[str]:
    """Delete `simddp-<pid>-...` namespaces whose pid is gone; return their names."""
    removed = []
    for name in _list_namespaces():
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        if not pid_alive(int(parts[1])):
            _delete_netns(name)
            removed.append(name)
    return removed


def _build(hub: str, hosts: tuple[Host, ...], qdisc: list[str] | None, created: list[str]) -> str:
    _add_netns(hub, created)
    # The TCP store listens dual-stack, so it sees peers as ::ffff:10.x.y.z; list that form too.
    hosts_file = "127.0.0.1 localhost\n" + "".join(
        f"{ip} {host.netns} host{i}\n" for i, host in enumerate(hosts)
        for ip in (host.ip, f"::ffff:{host.ip}"))
    _ip("-n", hub, "link", "add", "br0", "type", "bridge")
    # No IPv6 link-local addresses: gloo should see exactly one address on its NIC.
    _ip("-n", hub, "link", "set", "br0", "addrgenmode", "none")
    _ip("-n", hub, "link", "set", "br0", "up")
    cpus = os.sched_getaffinity(0)   # host i's NIC and port steer to one of them (host_stack)
    warned: set[str] = set()         # each refused step is said once per cluster
    for i, host in enumerate(hosts):
        _add_netns(host.netns, created)
        etc_dir = os.path.join(_NETNS_ETC_DIR, host.netns)
        os.makedirs(etc_dir, exist_ok=True)
        with open(os.path.join(etc_dir, "hosts"), "w") as handle:
            handle.write(hosts_file)
        port = f"port{i}"
        _ip("-n", hub, "link", "add", port, "type", "veth", "peer", "name", host.ifname,
            "netns", host.netns)
        _ip("-n", hub, "link", "set", port, "addrgenmode", "none")
        _ip("-n", hub, "link", "set", port, "master", "br0", "up")
        _ip("-n", host.netns, "link", "set", "lo", "up")
        _ip("-n", host.netns, "addr", "add", f"{host.ip}/24", "dev", host.ifname)
        _ip("-n", host.netns, "link", "set", host.ifname, "addrgenmode", "none")
        _ip("-n", host.netns, "link", "set", host.ifname, "up")
        cpu = host_stack.host_cpus(i, cpus)
        _best_effort(hub, host_stack.STEER, host_stack.steer_script(port, cpu), warned)
        for what, script in host_stack.host_steps(host.ifname, f"{host.ip}/24", cpu):
            _best_effort(host.netns, what, script, warned)
        if qdisc is not None:   # on the switch's port: what host i receives (docstring)
            _run(["tc", "-n", hub, "qdisc", "add", "dev", port, "root", *qdisc])
    return "" if host_stack.CONGESTION in warned else host_stack.CONGESTION_CONTROL


def _best_effort(netns: str, what: str, script: str, warned: set[str]) -> bool:
    """Run ``script`` in ``netns``; where the kernel refuses it, one warning line (once per
    ``what``) and the cluster goes on without it (realrun/launch/host_stack.py)."""
    try:
        _ip("netns", "exec", netns, "sh", "-c", script)
        return True
    except RuntimeError as e:
        if what not in warned:
            warned.add(what)
            reason = str(e).rsplit("failed: ", 1)[-1]
            print(f"realrun: warning: emulated hosts run without {what} ({reason}): "
                  f"{host_stack.WITHOUT[what]}", file=sys.stderr)
        return False


def _add_netns(name: str, created: list[str]) -> None:
    try:
        _ip("netns", "add", name)
    except RuntimeError as e:
        raise NetnsUnavailable(f"cannot create network namespace {name}: {e}") from e
    created.append(name)


def _delete_netns(name: str) -> None:
    _ip("netns", "delete", name, check=False)
    shutil.rmtree(os.path.join(_NETNS_ETC_DIR, name), ignore_errors=True)


def _ip(*args: str, check: bool = True) -> None:
    _run(["ip", *args], check=check)


def _run(argv: list[str], check: bool = True) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed: {one_line(done.stderr or done.stdout)}")


def _list_namespaces() -> list[str]:
    names: set[str] = set()
    for directory in (_NETNS_DIR, _NETNS_ETC_DIR):  # a crash can leave either behind
        try:
            names.update(os.listdir(directory))
        except FileNotFoundError:
            pass
    return sorted(names)


def bind_free_port(ip: str) -> int:
    """A TCP port free on ``ip`` (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ip, 0))
        return sock.getsockname()[1]


def _in_netns(netns: str, fn):
    """Run fn() in a short-lived thread that entered `netns`; network namespaces are per
    thread, so the rest of this process stays where it was."""
    result: dict[str, object] = {}

    def _enter_and_call() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(os.path.join(_NETNS_DIR, netns)) as handle:
                if libc.setns(handle.fileno(), _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into {netns}: {os.strerror(err)}")
            result["value"] = fn()
        except BaseException as e:  # handed to the calling thread below
            result["error"] = e

    worker = threading.Thread(target=_enter_and_call, name=f"netns-{netns}")
    worker.start()
    worker.join()
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["value"]

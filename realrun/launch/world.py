"""The world a command runs on, checked once: :class:`WorldConfig`, and its flags, defined once.

Ranks, backend, emulated hosts, link shaping and the collective timeout mean the same to every
command: one flag (:func:`add_world_args`), one field and one check each. No torch here::

    >>> w = WorldConfig(world_size=2, emulate_hosts=2, link_gbit=1.0)
    >>> w.launch_args()["emulate_hosts"], WorldConfig(link_gbit=None).timeout_s
    (2, 60.0)
    >>> WorldConfig(world_size=4, emulate_hosts=2).ranks_per_host
    2
    >>> WorldConfig(world_size=4, emulate_hosts=3)
    Traceback (most recent call last):
    ...
    simddp.errors.InputError: --emulate-hosts 3: must equal --world-size 4 or divide it (the same number of ranks on every emulated host, e.g. --world-size 3 or 6)
"""
from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass, replace

from realrun.launch.env import is_torchrun, spawn_env
from simddp.errors import InputError

BACKENDS = ("gloo", "nccl")
# How long a collective may wait before the run fails: a step's collectives come every few
# ms; a sweep's 64 MiB-1 GiB messages (and FSDP2's first steps) take seconds on a shaped link.
STEP_TIMEOUT_S = 60.0
SWEEP_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class WorldConfig:
    """How many ranks, on what backend, on which (emulated) hosts, with what patience.
    ``world_size`` None: torchrun's, else ``emulate_hosts``, else 2; emulated hosts get the
    ranks host-major."""

    world_size: int | None = None
    backend: str = "gloo"
    emulate_hosts: int | None = None
    link_gbit: float | None = None
    timeout_s: float = STEP_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.world_size is None:  # torchrun's world, else one rank per emulated host, or 2
            size = (int(os.environ["WORLD_SIZE"]) if is_torchrun()
                    else self.emulate_hosts or 2)
            object.__setattr__(self, "world_size", size)
        _require_int("--world-size", self.world_size, 1)
        if self.backend not in BACKENDS:
            raise InputError(f"--backend: unknown {self.backend!r}; choose gloo or nccl")
        if not (isinstance(self.timeout_s, (int, float)) and not isinstance(self.timeout_s, bool)
                and math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise InputError(f"--timeout-s must be a number of seconds > 0, got "
                             f"{self.timeout_s!r}")
        if self.emulate_hosts is not None:
            _require_int("--emulate-hosts", self.emulate_hosts, 1)
            if self.world_size % self.emulate_hosts:
                hosts = self.emulate_hosts
                raise InputError(
                    f"--emulate-hosts {hosts}: must equal --world-size {self.world_size} or "
                    f"divide it (the same number of ranks on every emulated host, e.g. "
                    f"--world-size {hosts} or {2 * hosts})")
            if is_torchrun():
                raise InputError(f"--emulate-hosts {self.emulate_hosts}: starts its own ranks; "
                                 "run it without torchrun")
        if self.link_gbit is not None:
            if self.emulate_hosts is None:
                raise InputError(f"--link-gbit {self.link_gbit:g}: shapes emulated hosts; "
                                 "add --emulate-hosts N")
            if not (isinstance(self.link_gbit, (int, float)) and self.link_gbit > 0):
                raise InputError(f"--link-gbit must be a rate in Gbit/s > 0, got "
                                 f"{self.link_gbit!r}")
        if is_torchrun() and self.world_size != int(os.environ["WORLD_SIZE"]):
            raise InputError(f"--world-size {self.world_size}: torchrun started "
                             f"{os.environ['WORLD_SIZE']} ranks; drop the flag")

    @property
    def ranks_per_host(self) -> int:
        """Ranks on one (emulated) host: the world on loopback, world / hosts emulated."""
        return self.world_size // (self.emulate_hosts or 1)

    @property
    def node_shape(self) -> tuple[int, int]:
        """(nodes, ranks per node): an emulated host is a node; under torchrun a node is
        ``LOCAL_WORLD_SIZE`` ranks (one node where that does not divide the world).

        >>> WorldConfig(world_size=4, emulate_hosts=2).node_shape, WorldConfig(2).node_shape
        ((2, 2), (1, 2))
        """
        per = self.ranks_per_host
        if is_torchrun():
            local = int(os.environ.get("LOCAL_WORLD_SIZE", self.world_size))
            per = local if 0 < local and self.world_size % local == 0 else self.world_size
        return self.world_size // per, per

    def sized(self, world_size: int) -> "WorldConfig":
        """The same world with another number of ranks (calibrate --world-sizes 2,4)."""
        return replace(self, world_size=world_size)

    def launch_args(self) -> dict:
        """The keyword arguments of ``realrun.launch.run_world`` this world sets."""
        return {"world_size": self.world_size, "backend": self.backend,
                "timeout_s": self.timeout_s, "emulate_hosts": self.emulate_hosts,
                "link_gbit": self.link_gbit}

    def prestart(self, threads_per_rank: int, user_module: str | None = None) -> None:
        """Start the fork server for this world's ranks now, in the background
        (realrun/launch/forkserver.py); nothing under torchrun or where ranks start fresh."""
        from realrun.launch import forkserver
        if not is_torchrun() and forkserver.serves(self.backend, self.emulate_hosts):
            forkserver.prestart(spawn_env(threads_per_rank), user_module)

    def check_local_gpus(self) -> None:
        """For nccl, one GPU per rank this host starts, checked before anything runs."""
        if self.backend != "nccl":
            return
        from realrun.launch.context import require_gpus   # torch: only when nccl is asked
        try:
            require_gpus(1 if is_torchrun() else self.world_size)
        except ValueError as e:
            raise InputError(str(e)) from None

    @property
    def link_label(self) -> str:
        """What the ranks talked over: loopback, an emulated link, or torchrun's network."""
        if is_torchrun():
            return "torchrun"
        if self.emulate_hosts is None:
            return "loopback"
        return (f"emulated-{self.link_gbit:g}Gbit" if self.link_gbit is not None
                else "emulated-unshaped")


def add_world_args(p: argparse.ArgumentParser, *, timeout_s: float, title: str = "world",
                   world_sizes: bool = False, ranks_help: str = "") -> None:
    """The world's flags: --world-size (or calibrate's --world-sizes list), --backend,
    --emulate-hosts, --link-gbit, --timeout-s (default ``timeout_s``)."""
    g = p.add_argument_group(title)
    ranks = ranks_help or "ranks (default 2; under torchrun, its WORLD_SIZE)"
    if world_sizes:
        g.add_argument("--world-sizes", default=None,
                       help="comma list, e.g. 2,4: one run and one link file each (default 2, "
                            "or --emulate-hosts; under torchrun its world)")
        g.add_argument("--world-size", dest="world_sizes", help="same as --world-sizes N")
    else:
        g.add_argument("--world-size", type=int, default=None, help=ranks)
    g.add_argument("--backend", default="gloo", choices=BACKENDS,
                   help="gloo (CPU) or nccl (one GPU per rank) (default %(default)s)")
    g.add_argument("--emulate-hosts", type=int, default=None,
                   help="run the ranks on N network namespaces, host-major, the same "
                        "number on each (root; must divide the world size)")
    g.add_argument("--link-gbit", type=float, default=None,
                   help="shape each emulated host's link to this many Gbit/s (tbf; needs "
                        "--emulate-hosts)")
    g.add_argument("--timeout-s", type=float, default=timeout_s,
                   help="seconds any collective may wait before the run fails "
                        "(default %(default)s)")


def world_from_args(args: argparse.Namespace, *, min_ranks: int = 1, why: str = "",
                    world_size: int | None = None) -> WorldConfig:
    """The WorldConfig of the flags; ``--world-size`` (or ``world_size``) defaults to
    torchrun's world, else 2, and must be at least ``min_ranks`` (``why`` says why)."""
    size = world_size if world_size is not None else getattr(args, "world_size", None)
    if size is None:
        size = int(os.environ["WORLD_SIZE"]) if is_torchrun() else 2
    _require_int("--world-size", size, min_ranks, why)
    return WorldConfig(world_size=size, backend=args.backend, emulate_hosts=args.emulate_hosts,
                       link_gbit=args.link_gbit, timeout_s=args.timeout_s)


def _require_int(flag: str, value, minimum: int, why: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{flag} must be an integer >= {minimum}, got {value!r}"
                         + (f" ({why})" if why else ""))

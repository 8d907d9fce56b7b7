"""The engine's output on every path it has, as JSON: the refactor guard (issue 24).

Each case is one simulate() call covering a path of the engine: plain all-reduces with and
without overlap, contention (measured host), host copies, comm hooks, FSDP units with gates,
blocking collectives, accumulation. ``python -m tests.simddp.golden`` rewrites
tests/data/golden-sweeps/timelines.json; test_golden.py compares against it. Rewrite it only
when a change is meant to move predictions, and say so in the commit.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from simddp import (build_profile, get_link, load_host, load_link_file, load_profile,
                    make_strategy, parse_model, plan, simulate)
from simddp.inputs.host import HostCosts

DATA = Path(__file__).resolve().parent.parent / "data"
GOLDEN = DATA / "golden-sweeps"
MEASURED = DATA / "validate-default-2026-11-23"


def cases():
    """(name, profile, link, strategy, world size, host) of each engine path."""
    small = build_profile(parse_model("mlp-6x512"))
    prof = load_profile(MEASURED / "profile.json")
    link, host = load_link_file(MEASURED / "link.json"), load_host(MEASURED / "profile.json")
    eth = get_link("eth-100g")
    fsdp_host = dataclasses.replace(host, implementations={
        **host.implementations,
        "fsdp": HostCosts(copy_gbps=5.0, gather_s=1e-4, scatter_s=2e-4,
                          blocking_collectives=True)})
    out = []
    for name in ("naive", "flat", "overlap"):
        out.append((f"{name}-measured", prof, link, make_strategy(name), 2, host))
    for mb in (1, 4, 40):
        out.append((f"bucketed{mb}-measured", prof, link, make_strategy("bucketed", mb), 2, host))
        out.append((f"ddp{mb}-measured", prof, link, make_strategy("ddp", mb), 2, host))
    out.append(("no_sync-measured", prof, link, make_strategy("no_sync", 4, accum_steps=3), 2,
                host))
    out.append(("sync_each-free", small, eth, make_strategy("sync_each", 1, accum_steps=2), 4,
                None))
    for hook in ("fp16", "powersgd:2"):
        out.append((f"ddp+{hook}-measured", prof, link, make_strategy(f"ddp+{hook}", 4), 2,
                    host))
    for name in ("fsdp", "zero2"):
        out.append((f"{name}-free", small, eth, make_strategy(name), 4, None))
        out.append((f"{name}-units", small, eth, make_strategy(name, shard_unit_mb=2), 4, None))
        out.append((f"{name}-blocking", prof, link, make_strategy(name), 2, fsdp_host))
    out.append(("overlap-free", small, eth, make_strategy("overlap"), 8, None))
    return out


def timelines() -> dict:
    out = {}
    for name, profile, link, strategy, world, host in cases():
        # the engine's own paths: no contention assumed where none was measured
        r = simulate(profile, link, plan(profile, strategy), world, host=host,
                     contention=None if host is not None else "none")
        out[name] = {"step_s": r.step_s, "exposed_comm_s": r.exposed_comm_s,
                     "spans": [[s.lane, s.label, s.start_s, s.end_s, s.kind] for s in r.spans]}
    return out


if __name__ == "__main__":
    (GOLDEN / "timelines.json").write_text(json.dumps(timelines(), indent=0) + "\n")

"""What torch FSDP2 costs the host around its collectives: the "fsdp" implementation's HostCosts.

FSDP2 copies each unit's shard in and the gathered parameters out, the gradients into a
reduce-scatter and the shard out, with DTensor bookkeeping in Python hooks around each; none of
that is the wire's. Measured on the profile's ranks when a sharded strategy will be predicted::

    times = measure_fsdp(workload, payload, ctx)              # rank side, every rank at once
    host_s, steps_s = host_over_rounds(times_max_over_ranks)  # parent
    costs, info = fsdp_costs(host_s, plans, copy_gbps, world_size, optimizer_s, blocking=True)

Per round, ``host = strategy's step - compute-only step - the plan's collectives alone``, for
fsdp and zero2, median over rounds; less the copies, fsdp's U more all-gathers split the rest
into ``gather_s`` and ``scatter_s``. On Gloo the collectives block the training thread
(``blocking_collectives``); on NCCL they overlap (docs/FINDINGS.md#sharded-steps-fsdp2-on-gloo).
"""
from __future__ import annotations

import gc
import statistics
import time
import warnings

import torch
import torch.distributed as dist

from realrun.configs import config_of
from realrun.steps import Trainer
from realrun.workload import Workload
from simddp.inputs.host import HostCosts
from simddp.sim.overheads import shard_host_s
from simddp.cost.factors import ALL_GATHER
from simddp.planning.plans import Plan, plan as make_plan
from simddp.result import COMPUTE_ONLY
from simddp.planning.strategy import SHARDED, make_strategy

# many short rounds, so that no one slow stretch of the box decides a strategy's host seconds
ROUNDS, CHUNK, WARMUP = 6, 2, 2


class Wire:
    """The plan's all-gathers and reduce-scatters of one sharded strategy, each waited for."""

    def __init__(self, plan: Plan, world_size: int, device, pool: dict | None = None) -> None:
        """Every call's buffers are views of one full and one shard buffer of the largest call
        (``pool``, shared with other Wires): a buffer per call held several times the weights."""
        sizes = [c.nbytes // 4 - (c.nbytes // 4) % world_size for c in plan.collectives]
        pool = {} if pool is None else pool
        largest = max(sizes, default=0)
        if pool.get("full") is None or pool["full"].numel() < largest:
            pool["full"] = torch.zeros(largest, device=device)
            pool["shard"] = torch.zeros(largest // world_size, device=device)
        self.calls = [(c.kind, pool["full"][:n], pool["shard"][:n // world_size])
                      for c, n in zip(plan.collectives, sizes)]

    def step(self) -> None:
        for kind, full, shard in self.calls:
            if kind == ALL_GATHER:
                dist.all_gather_into_tensor(full, shard)
            else:
                dist.reduce_scatter_tensor(shard, full)


def sharded_plans(module, shard_unit_mb: float | None) -> dict[str, Plan]:
    """fsdp's and zero2's plans on ``module`` (what realrun/sharded.py shards it by)."""
    from realrun.tensors import module_profile
    profile = module_profile(module)
    return {s: make_plan(profile, make_strategy(s, shard_unit_mb=shard_unit_mb))
            for s in SHARDED}


def measure_fsdp(workload: Workload, payload: dict, ctx, shard_unit_mb: float | None = None,
                 plain: Trainer | None = None, on_group=None) -> dict[str, list[float]]:
    """Rank side: per-step seconds of fsdp and zero2, each round-robin with the compute-only
    step (``compute-only:fsdp``) and its plan's collectives alone (``wire:fsdp``); one sharded
    model alive at a time. ``on_group(name)`` runs after each, once released."""
    warnings.filterwarnings("ignore", category=FutureWarning)  # *_tensor's deprecation notes
    plain = plain or Trainer(config_of(None), workload, ctx, payload)
    plans, pool, times = sharded_plans(plain.model, shard_unit_mb), {}, {}
    for s in SHARDED:
        trainer = Trainer(config_of(make_strategy(s, shard_unit_mb=shard_unit_mb)), workload,
                          ctx, payload)
        times.update(_round_robin({
            f"{COMPUTE_ONLY}:{s}": (plain.step, plain.optimizer),
            s: (trainer.step, trainer.optimizer),
            f"wire:{s}": (Wire(plans[s], ctx.world_size, ctx.device, pool).step, None)}, ctx))
        del trainer
        gc.collect()  # FSDP2's hooks hold the module in cycles
        if on_group is not None:
            on_group(s)
    return times


def _round_robin(items: dict[str, tuple], ctx) -> dict[str, list[float]]:
    """Per-step seconds of each (step, optimizer or None), round-robin, each after a barrier;
    after its chunk an item's gradients are dropped, so only the stepping one holds any."""
    for step, optimizer in items.values():
        for _ in range(WARMUP):
            step()
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
    times: dict[str, list[float]] = {name: [] for name in items}
    for _ in range(ROUNDS):
        for name, (step, optimizer) in items.items():
            for _ in range(CHUNK):
                ctx.barrier()
                t0 = time.perf_counter()
                step()
                ctx.synchronize()
                times[name].append(time.perf_counter() - t0)
            if optimizer is not None:
                optimizer.zero_grad(set_to_none=True)
    return times


def host_over_rounds(times_s: dict[str, list[float]], chunk: int = CHUNK
                     ) -> tuple[dict[str, float], dict[str, float]]:
    """(fsdp's and zero2's host seconds, every item's median step) from :func:`measure_fsdp`'s
    seconds (max over ranks): step − compute-only − wire within each round, median over rounds.

    >>> t = {"compute-only": [1, 1, 5, 5], "fsdp": [4, 4, 12, 12], "zero2": [3, 3, 9, 9],
    ...      "wire:fsdp": [2, 2, 2, 2], "wire:zero2": [1, 1, 1, 1]}
    >>> host_over_rounds(t, chunk=2)[0]          # rounds: fsdp 1 and 5, zero2 1 and 3
    {'fsdp': 3.0, 'zero2': 2.0}
    """
    def rounds(k: str) -> list[float]:
        t = times_s[k]
        return [float(statistics.median(t[i:i + chunk])) for i in range(0, len(t), chunk)]
    def compute(s: str) -> list[float]:  # measured beside s, or once beside both
        return rounds(f"{COMPUTE_ONLY}:{s}" if f"{COMPUTE_ONLY}:{s}" in times_s else COMPUTE_ONLY)
    host = {s: statistics.median(step - c - wire for step, c, wire in
                                 zip(rounds(s), compute(s), rounds(f"wire:{s}")))
            for s in SHARDED}
    return host, {k: float(statistics.median(t)) for k, t in times_s.items()}


def fsdp_costs(host_s: dict[str, float], plans: dict[str, Plan], copy_gbps: float | None,
               world_size: int, optimizer_s: float = 0.0, blocking: bool = False
               ) -> tuple[HostCosts, dict]:
    """The "fsdp" implementation's costs from :func:`host_over_rounds`'s host seconds, and how
    they were derived. A sharded optimizer updates 1/p, so (p−1)/p of ``optimizer_s`` goes back
    to the host; less the copies, the rest is A·gather_s + R·scatter_s (A all-gathers, R
    reduce-scatters): two strategies, two unknowns (:func:`_solve`).

    >>> from simddp import Layer, ModelProfile
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,)) for i in range(2)))
    >>> plans = {s: make_plan(toy, make_strategy(s)) for s in SHARDED}   # fsdp 4 AG, zero2 2
    >>> costs, info = fsdp_costs({"fsdp": 0.008, "zero2": 0.004}, plans, None, 2, blocking=True)
    >>> round(costs.gather_s * 1e3, 6), round(costs.scatter_s * 1e3, 6), costs.blocking_collectives
    (2.0, 0.0, True)
    """
    rest, calls = {}, {}
    for s in SHARDED:
        p = plans[s]
        copies_s = sum(sum(shard_host_s(HostCosts(copy_gbps=copy_gbps), c, world_size))
                       for c in p.collectives)
        rest[s] = host_s[s] + optimizer_s * (1 - 1 / world_size) - copies_s
        gathers = sum(c.kind == ALL_GATHER for c in p.collectives)
        calls[s] = (gathers, len(p.collectives) - gathers)
    gather_s, scatter_s = _solve([calls[s] for s in SHARDED], [rest[s] for s in SHARDED])
    costs = HostCosts(copy_gbps=copy_gbps, gather_s=round(float(gather_s), 9),  # not numpy's
                      scatter_s=round(float(scatter_s), 9), blocking_collectives=bool(blocking))
    info = {"host_ms": {k: v * 1e3 for k, v in host_s.items()},
            "host_less_copies_ms": {k: v * 1e3 for k, v in rest.items()},
            "calls": {k: {"all_gather": a, "reduce_scatter": r} for k, (a, r) in calls.items()},
            "gather_us": costs.gather_s * 1e6, "scatter_us": costs.scatter_s * 1e6,
            "blocking_collectives": blocking}
    return costs, info


def _solve(calls: list[tuple[int, int]], rest: list[float]) -> tuple[float, float]:
    """(g, s) ≥ 0 with a·g + r·s = rest for each (a, r): exact if that is ≥ 0, else the
    least-squares fit with g or s at 0, whichever fits better (both 0 if neither is > 0)."""
    (a1, r1), (a2, r2) = calls
    det = a1 * r2 - a2 * r1
    if det:
        g = (rest[0] * r2 - rest[1] * r1) / det
        s = (a1 * rest[1] - a2 * rest[0]) / det
        if g >= 0 and s >= 0:
            return g, s

    def fit(cols: list[int]) -> float:
        den = sum(c * c for c in cols)
        return max(0.0, sum(c * y for c, y in zip(cols, rest)) / den) if den else 0.0

    def miss(g: float, s: float) -> float:
        return sum((a * g + r * s - y) ** 2 for (a, r), y in zip(calls, rest))
    only_g, only_s = (fit([a1, a2]), 0.0), (0.0, fit([r1, r2]))
    return min(only_g, only_s, key=lambda gs: miss(*gs))

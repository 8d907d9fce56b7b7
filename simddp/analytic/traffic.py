"""Bytes on the wire per strategy: every collective of the plan, timed by the collective law.

Picture the link's log for one optimizer step of each strategy, with no overlap: how many
calls, how many bytes, how much of the time is α and how much bandwidth. Every row comes from
``simddp.plan`` — the collectives the simulator moves — so ``simddp account`` and
``simddp sweep`` never disagree about what travels::

    >>> from simddp import Link
    >>> from simddp.analytic.memory import Precision
    >>> from simddp.presets import build_profile, parse_model
    >>> rows = comm_rows(build_profile(parse_model("mlp-4x1024")), Link("l", 0.0, 1.0), 4,
    ...                  Precision(), 25, 1, ["fp16"])
    >>> {r["strategy"]: r["sent_bytes_per_rank"] / 2**20 for r in rows if "+" in r["strategy"]
    ...  or r["strategy"] in ("ddp", "fsdp", "zero2")}
    {'ddp': 24.0, 'fsdp': 36.0, 'zero2': 24.0, 'bucketed+fp16': 12.0, 'ddp+fp16': 12.0}

(16 MiB of gradients, 4 ranks: an all-reduce sends 2·3/4 of its bytes, a reduce-scatter or an
all-gather 3/4; fp16 halves; fsdp gathers twice and reduce-scatters once, zero2 once each.)

Gradients are bucketed at ``--grad`` precision, as ``bucket_cap_mb`` counts them; a narrower
``--comm-dtype`` shrinks every all-reduce and reduce-scatter, and FSDP gathers parameters at
the compute copy's dtype (else the master's). A comm hook compresses fp32 gradients: it needs
``--grad fp32`` and ignores ``--comm-dtype``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from simddp.analytic.memory import PROFILE_GRAD_BYTES, Precision
from simddp.errors import InputError
from simddp.planning.hooks import CommHook, parse_comm_hook
from simddp.kinds import CollectiveKind
from simddp.cost import parts
from simddp.cost.factors import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, kind_factor
from simddp.inputs.link import Link
from simddp.planning.plans import plan
from simddp.inputs.profile import ModelProfile
from simddp.planning.strategy import HOOKABLE, SHARDED, STRATEGIES, Strategy, make_strategy

def at_dtype(profile: ModelProfile, elem_bytes: int) -> ModelProfile:
    """The profile with gradients stored at ``elem_bytes`` per element instead of fp32."""
    layers = tuple(replace(layer, grad_bytes=tuple(
        max(1, n // PROFILE_GRAD_BYTES * elem_bytes) for n in layer.grad_bytes))
        for layer in profile.layers)
    return replace(profile, layers=layers)


def traffic_row(name: str, calls: Sequence[tuple[str, float]], link: Link, world: int) -> dict:
    """Totals for (kind, bytes) calls: a ring all-reduce sends 2(p−1)/p·n per rank, an
    all-gather or a reduce-scatter (p−1)/p·n, i.e. half an all-reduce's bandwidth term.
    Each call's time is the law's (simddp/cost/single.py), split into its fixed part (α; a
    curve's low-end α) and the rest."""
    alpha_s = bandwidth_s = sent = 0.0
    for kind, n in calls:
        fixed_s, bytes_s = parts(link, kind, n, world)
        alpha_s += fixed_s
        bandwidth_s += bytes_s
        sent += kind_factor(kind, world) * n
    # spelt as on a timeline: "all-reduce + all-gather"
    kinds = [CollectiveKind(k).span_kind for k in dict.fromkeys(k for k, _ in calls)]
    return {"strategy": name, "kind": " + ".join(kinds) or "none", "collectives": len(calls),
            "payload_bytes": sum(n for _, n in calls), "sent_bytes_per_rank": sent,
            "alpha_s": alpha_s, "bandwidth_s": bandwidth_s, "time_s": alpha_s + bandwidth_s}


def account_strategies(bucket_mb: float, accum_steps: int, hooks: Sequence[CommHook] = (),
                       shard_unit_mb: float | None = None) -> list[Strategy]:
    """What ``simddp account`` lists: every DDP strategy, fsdp, zero2, then the hooked ones."""
    out = [make_strategy(name, bucket_mb, accum_steps) for name in STRATEGIES]
    out += [make_strategy(name, accum_steps=accum_steps, shard_unit_mb=shard_unit_mb)
            for name in SHARDED]
    out += [make_strategy(name, bucket_mb, accum_steps, comm_hook=hook)
            for hook in hooks for name in HOOKABLE]
    return out


def comm_rows(profile: ModelProfile, link: Link, world: int, prec: Precision, bucket_mb: float,
              accum_steps: int, hooks: Sequence[str | CommHook] = (),
              shard_unit_mb: float | None = None) -> list[dict]:
    """Communication per optimizer step per rank of every strategy (see the module text)."""
    hooks = [h if isinstance(h, CommHook) else parse_comm_hook(h) for h in hooks]
    if hooks and prec.grad != "fp32":
        raise InputError(f"--comm-hook compresses fp32 gradients; --grad is {prec.grad}")
    grads = at_dtype(profile, prec.grad_bytes)
    scale = {ALL_REDUCE: prec.comm_bytes / prec.grad_bytes,
             REDUCE_SCATTER: prec.comm_bytes / prec.grad_bytes,
             ALL_GATHER: prec.gather_bytes / prec.grad_bytes}
    rows = []
    for strategy in account_strategies(bucket_mb, accum_steps, hooks, shard_unit_mb):
        if strategy.comm_hook is None:
            calls = [(c.kind, c.nbytes * scale[c.kind]) for c in plan(grads, strategy).collectives]
        else:  # the hook sets the wire bytes of each call
            calls = [(c.kind, float(n)) for c in plan(profile, strategy).collectives
                     for n in c.calls]
        rows.append(traffic_row(strategy.name, calls, link, world))
    return rows

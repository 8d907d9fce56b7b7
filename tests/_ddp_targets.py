"""Rank functions for tests/realrun/test_ddp.py: train with realrun.DDP, compare with one process.

    run_world("tests._ddp_targets:train_and_compare",
              {"cases": {"bucketed": {"strategy": "bucketed", "bucket_mb": 0.25}}}, world_size=2)

Each rank starts from its OWN seed (the constructor's broadcast must fix that), trains on its
shard of a fixed global batch, and after every optimizer step compares its parameters and
buffers with a single-process model (rank 0's seed) trained in the same rank on the full
batch. The rank returns max abs differences and what it saw DDP launch; the test asserts.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from realrun.ddp import DDP

VOCAB, DIM, HIDDEN, TOKENS = 128, 256, 512, 4
PER_RANK = 8   # samples per rank and micro-step
LR = 0.1
STEPS = 5


class Net(nn.Module):
    """Tied embedding/head, a frozen layer, a per-seed buffer, a branch used only when asked,
    and (optionally) a layer never called. Trainable tensor ids, in parameters() order:
    0 embed.weight (= head.weight), 1-2 fc1, 3-4 fc2, 5-6 extra, 7-8 unused."""

    def __init__(self, with_unused: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.frozen = nn.Linear(DIM, DIM)
        self.frozen.requires_grad_(False)
        self.fc1 = nn.Linear(DIM, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, DIM)
        self.extra = nn.Linear(DIM, DIM)
        self.unused = nn.Linear(DIM, DIM) if with_unused else None
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("offset", 0.1 * torch.randn(DIM))  # differs per seed

    def forward(self, tokens: torch.Tensor, use_extra: bool) -> torch.Tensor:
        h = self.embed(tokens).mean(1) + self.offset
        h = h + 0.1 * self.frozen(h)
        h = h + self.fc2(torch.tanh(self.fc1(h)))
        if use_extra:
            h = h + self.extra(h)
        return self.head(h)


def _net(seed: int, device: torch.device, with_unused: bool = True) -> Net:
    torch.manual_seed(seed)
    return Net(with_unused).to(device)


def _batch(index: int, world_size: int, device: torch.device):
    """Global batch number `index`: the same on every rank; rank r's shard is rows r*PER_RANK.."""
    gen = torch.Generator().manual_seed(1000 + index)
    tokens = torch.randint(VOCAB, (world_size * PER_RANK, TOKENS), generator=gen)
    target = torch.randint(VOCAB, (world_size * PER_RANK,), generator=gen)
    return tokens.to(device), target.to(device)


def _shard(tensor: torch.Tensor, rank: int) -> torch.Tensor:
    return tensor[rank * PER_RANK:(rank + 1) * PER_RANK]


def _max_diff(a: nn.Module, b: nn.Module) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    return max((sa[k].double() - sb[k].double()).abs().max().item() for k in sa)


def _sgd_step(module: nn.Module) -> None:
    """Plain SGD (skips grads that are None), by hand: torch.optim's first step() costs
    seconds in a fresh rank (lazy imports), more than every case here together."""
    with torch.no_grad():
        for p in module.parameters():
            if p.grad is not None:
                p.sub_(LR * p.grad)


def _recorder(ddp: DDP, phase: list[str]) -> list:
    """Record (phase, tensor ids) of each collective DDP launches."""
    launches: list = []
    ddp.on_collective_launch = lambda c: launches.append((phase[0], list(c.tensor_ids)))
    return launches


def _train(ctx, rank: int, world_size: int, ddp_kwargs: dict, seed: int) -> dict:
    """5 SGD steps; extra is used on rank 0 only, unused never; zero_grad alternates modes."""
    ddp = DDP(_net(seed + rank, ctx.device), **ddp_kwargs)
    ref = _net(seed, ctx.device)
    phase = ["backward"]
    launches = _recorder(ddp, phase)
    out = {"initial_diff": _max_diff(ddp.module, ref), "diffs": [], "collectives": [],
           "launches": [], "frozen_grad_none": True, "unused_grad_zero": True,
           "extra_grad_set": True, "repeat_finish_launches": 0}
    for step in range(STEPS):
        tokens, target = _batch(step, world_size, ctx.device)
        set_to_none = step % 2 == 0
        ddp.zero_grad(set_to_none=set_to_none)
        ref.zero_grad(set_to_none=set_to_none)
        phase[0] = "backward"
        logits = ddp(_shard(tokens, rank), use_extra=(rank == 0))
        F.cross_entropy(logits, _shard(target, rank)).backward()
        phase[0] = "finish"
        ddp.finish_gradient_synchronization()
        launched = len(launches)
        ddp.finish_gradient_synchronization()  # idempotent: nothing more is sent
        out["repeat_finish_launches"] += len(launches) - launched
        out["collectives"].append(ddp.collectives_last_step)
        out["launches"].append(launches[:])
        launches.clear()
        m = ddp.module
        out["frozen_grad_none"] &= m.frozen.weight.grad is None and m.frozen.bias.grad is None
        out["unused_grad_zero"] &= all(p.grad is not None and not p.grad.any()
                                       for p in m.unused.parameters())
        out["extra_grad_set"] &= all(p.grad is not None for p in m.extra.parameters())
        _sgd_step(ddp)
        # The reference: per-shard mean losses averaged over ranks = what DDP's average computes.
        loss = sum(F.cross_entropy(ref(_shard(tokens, r), use_extra=(r == 0)), _shard(target, r))
                   for r in range(world_size)) / world_size
        loss.backward()
        _sgd_step(ref)
        out["diffs"].append(_max_diff(ddp.module, ref))
    out["buckets"] = [list(b) for b in ddp.buckets]
    out["plan"] = [list(c.tensor_ids) for c in ddp.plan.collectives]
    out["param_names"] = list(ddp.param_names)
    ddp.remove_hooks()
    return out


def _accumulate(ctx, rank: int, world_size: int, ddp_kwargs: dict, micro_steps: int) -> dict:
    """3 optimizer steps of `micro_steps` micro-steps each, all but the last inside no_sync()."""
    ddp = DDP(_net(300 + rank, ctx.device, with_unused=False), **ddp_kwargs)
    ref = _net(300, ctx.device, with_unused=False)
    phase = ["backward"]
    launches = _recorder(ddp, phase)
    try:
        with ddp.no_sync():
            raise KeyError("leaves no_sync by an exception")
    except KeyError:
        pass
    out = {"flag_restored": ddp._require_sync, "diffs": [], "silent_micro_launches": 0,
           "synced_launches": []}
    for step in range(3):
        ddp.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        ref_loss = 0.0
        for micro in range(micro_steps):
            tokens, target = _batch(100 + step * micro_steps + micro, world_size, ctx.device)
            last = micro == micro_steps - 1
            phase[0] = "backward"
            with nullcontext() if last else ddp.no_sync():
                logits = ddp(_shard(tokens, rank), use_extra=True)
                (F.cross_entropy(logits, _shard(target, rank)) / micro_steps).backward()
                if not last:
                    ddp.finish_gradient_synchronization()  # inside no_sync: a no-op
                    out["silent_micro_launches"] += len(launches)
            ref_loss = ref_loss + sum(
                F.cross_entropy(ref(_shard(tokens, r), use_extra=True), _shard(target, r))
                for r in range(world_size)) / (world_size * micro_steps)
        phase[0] = "finish"
        ddp.finish_gradient_synchronization()
        out["synced_launches"].append(launches[:])
        launches.clear()
        _sgd_step(ddp)
        ref_loss.backward()
        _sgd_step(ref)
        out["diffs"].append(_max_diff(ddp.module, ref))
    # A second backward in a synced step, without finish in between, is a usage error.
    for _ in range(2):
        try:
            F.cross_entropy(ddp(_shard(tokens, rank), use_extra=True),
                            _shard(target, rank)).backward()
            out["double_backward_error"] = ""
        except RuntimeError as e:
            out["double_backward_error"] = str(e)
            break
    ddp.finish_gradient_synchronization()
    ddp.remove_hooks()
    return out


def train_and_compare(payload: dict, ctx) -> dict:
    """payload: {"cases": {name: DDP kwargs}, "subgroup": optional ranks for a process_group case}.

    Returns {name: {"train": ..., "accum": {"2": ..., "4": ...}, "subgroup": ...}}; all cases
    run in one world because starting one costs more than the training itself.
    """
    results = {}
    for name, kwargs in payload["cases"].items():
        result = {"train": _train(ctx, ctx.rank, ctx.world_size, kwargs, seed=100),
                  "accum": {str(k): _accumulate(ctx, ctx.rank, ctx.world_size, kwargs, k)
                            for k in (2, 4)}}
        ranks = payload.get("subgroup")
        if ranks:
            group = dist.new_group(ranks)  # every rank must call new_group
            if ctx.rank in ranks:
                result["subgroup"] = _train(ctx, ranks.index(ctx.rank), len(ranks),
                                            dict(kwargs, process_group=group), seed=500)
            dist.barrier()
        results[name] = result
    return results

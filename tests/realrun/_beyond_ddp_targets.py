"""Rank functions for tests/realrun/test_beyond_ddp.py: FSDP2 and comm hooks against one process.

    run_world("tests.realrun._beyond_ddp_targets:train_and_compare",
              {"cases": {"fsdp": {"strategy": "fsdp", "bucket_mb": None}}}, world_size=2)

Every rank builds the model from one seed (FSDP2 broadcasts nothing), wraps it with
``realrun.steps.wrap`` (the code bench runs), trains on its shard of a fixed global batch with
plain SGD, and after every step compares its full parameters with a single-process model
trained on the whole batch. The rank returns the max abs differences and the largest total
parameter movement of the reference (to scale the lossy hooks' tolerance); the test asserts.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from realrun.steps import wrap

VOCAB, DIM, HIDDEN, TOKENS = 64, 64, 128, 4
PER_RANK = 4
LR = 0.1
STEPS = 6   # PowerSGD (start step 2, realrun/comm_hooks.py) compresses steps 2..5


class Block(nn.Module):
    """A module with a parameter of its own and a child with parameters (nested units)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(DIM))
        self.inner = nn.Linear(DIM, DIM)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.inner(h) * self.scale


class SharedNet(nn.Module):
    """Tied embedding/head (optional), a frozen layer, a layer with a frozen bias, a nested
    block. Every module runs on every rank (FSDP2 gathers per unit, so all ranks must)."""

    def __init__(self, tied: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.frozen = nn.Linear(DIM, DIM)
        self.frozen.requires_grad_(False)
        self.fc1 = nn.Linear(DIM, HIDDEN)
        self.fc1.bias.requires_grad_(False)          # a unit mixing frozen and trainable
        self.fc2 = nn.Linear(HIDDEN, DIM)
        self.block = Block()
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        if tied:
            self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens).mean(1)
        h = h + 0.1 * self.frozen(h)
        h = h + self.fc2(torch.tanh(self.fc1(h)))
        return self.head(self.block(h))


class LowRankNet(nn.Module):
    """Two bias-free square layers: with one sample per rank every weight gradient has rank
    1, and their average over 2 ranks rank <= 2, which PowerSGD of rank 2 sends exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(DIM, DIM, bias=False)
        self.l2 = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.tanh(self.l1(x)))


def _build(model: str, seed: int, device) -> nn.Module:
    torch.manual_seed(seed)
    return {"shared": SharedNet, "untied": lambda: SharedNet(tied=False),
            "lowrank": LowRankNet}[model]().to(device)


def _batch(model: str, index: int, rows: int, device):
    gen = torch.Generator().manual_seed(1000 + index)
    if model == "lowrank":
        x = torch.randn(rows, DIM, generator=gen)
        return x.to(device), torch.randn(rows, DIM, generator=gen).to(device)
    tokens = torch.randint(VOCAB, (rows, TOKENS), generator=gen)
    return tokens.to(device), torch.randint(VOCAB, (rows,), generator=gen).to(device)


def _loss(model: str, net: nn.Module, x, y) -> torch.Tensor:
    out = net(x)
    return F.mse_loss(out, y) if model == "lowrank" else F.cross_entropy(out, y)


def _full(t: torch.Tensor) -> torch.Tensor:
    """A parameter as one plain tensor (FSDP2's are DTensors sharded over the ranks)."""
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().double()


def _params(net: nn.Module) -> dict[str, torch.Tensor]:
    net = getattr(net, "module", net)     # torch DDP wraps; FSDP2 does not rename
    return {name: _full(p) for name, p in net.named_parameters(remove_duplicate=False)}


def _sgd(net: nn.Module) -> None:
    with torch.no_grad():
        for p in net.parameters():
            if p.grad is not None:
                p.sub_(LR * p.grad)


def _case(ctx, config: dict, model: str, per_rank: int) -> dict:
    rank, world = ctx.rank, ctx.world_size
    wrapped = wrap(_build(model, 7, ctx.device), config, ctx)
    net = wrapped.model
    ref = _build(model, 7, ctx.device)
    start = _params(ref)
    out = {"diffs": [], "moved": 0.0, "frozen_moved": 0.0, "tied_same": True,
           "collectives": None}
    for step in range(STEPS):
        x, y = _batch(model, step, world * per_rank, ctx.device)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        net.zero_grad(set_to_none=True)
        _loss(model, net, x[mine], y[mine]).backward()
        if wrapped.sync is not None:
            wrapped.sync()
        _sgd(net)
        ref.zero_grad(set_to_none=True)
        # per-shard mean losses averaged over ranks: what every DP average computes
        (sum(_loss(model, ref, x[r * per_rank:(r + 1) * per_rank],
                   y[r * per_rank:(r + 1) * per_rank]) for r in range(world)) / world).backward()
        _sgd(ref)
        got, want = _params(net), _params(ref)
        assert got.keys() == want.keys(), (sorted(got), sorted(want))
        out["diffs"].append(max((got[k] - want[k]).abs().max().item() for k in want))
    out["moved"] = max((want[k] - start[k]).abs().max().item() for k in want)
    if model != "lowrank":
        out["frozen_moved"] = max((got[k] - start[k]).abs().max().item()
                                  for k in ("frozen.weight", "frozen.bias", "fc1.bias"))
        if model == "shared":
            out["tied_same"] = bool(torch.equal(got["embed.weight"], got["head.weight"]))
    out["dtensor"] = any(hasattr(p, "full_tensor") for p in net.parameters())
    return out


def train_and_compare(payload: dict, ctx) -> dict:
    """Every case in ``payload["cases"]``: name -> {"config", "model", "per_rank"}."""
    torch.set_num_threads(1)
    return {name: _case(ctx, case["config"], case["model"], case.get("per_rank", PER_RANK))
            for name, case in payload["cases"].items()}

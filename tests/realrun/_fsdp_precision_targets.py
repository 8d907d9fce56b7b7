"""Rank functions for tests/realrun/test_fsdp_precision.py: FSDP2 under mixed precision
against one process that applies the same casts.

    run_world("tests.realrun._fsdp_precision_targets:train_and_compare",
              {"cases": {"fsdp-bf16": {"strategy": "fsdp", "param_dtype": "bf16"}}}, world_size=2)

Every rank wraps the model with ``realrun.steps.wrap`` (the code bench runs; the Strategy's
``param_dtype`` gives FSDP2's MixedPrecisionPolicy(param_dtype, reduce_dtype=fp32)), trains
on its slice of a fixed global batch with plain SGD, and after every step compares its loss
and full parameters with one process doing by hand what the policy does, as torch's own
test_fully_shard_mixed_precision.py builds its reference: an fp32 master model and a 16-bit
copy of it; forward and backward on the copy, one rank's slice at a time; each rank's
16-bit gradients cast to fp32 and averaged in fp32 (the fp32 reduce-scatter); the SGD step on
the fp32 master; the master cast into the copy again. It also keeps a plain fp32 model (no
casts), so the test can show the casts are what its tolerance sees.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn.functional as F

from realrun.configs import config_of
from realrun.precision import TORCH_DTYPES
from realrun.steps import wrap
from simddp.planning.strategy import make_strategy
from tests.realrun._beyond_ddp_targets import PER_RANK, _batch, _build, _params

LR = 0.1
STEPS = 4


def _sgd(params) -> None:
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(LR * p.grad)


def _loss(net, x, y) -> torch.Tensor:
    return F.cross_entropy(net(x).float(), y)   # the logits come out in param_dtype


def _case(ctx, case: dict) -> dict:
    rank, world = ctx.rank, ctx.world_size
    dtype = TORCH_DTYPES[case["param_dtype"]] if case["param_dtype"] else None
    strategy = make_strategy(case["strategy"], param_dtype=case["param_dtype"])
    wrapped = wrap(_build(case["model"], 7, ctx.device), config_of(strategy), ctx)
    net = wrapped.model
    compute_seen, hooks = _compute_dtype(net)
    master = _build(case["model"], 7, ctx.device)          # the fp32 weights the optimizer holds
    compute = copy.deepcopy(master).to(dtype) if dtype else master   # what forward runs on
    plain = _build(case["model"], 7, ctx.device)            # fp32 throughout: no casts
    out = {"param_diffs": [], "loss_diffs": [], "plain_diffs": [], "moved": 0.0,
           "dtypes": sorted({str(p.dtype) for p in net.parameters()})}
    start = _params(master)
    for step in range(STEPS):
        x, y = _batch(case["model"], step, world * PER_RANK, ctx.device)
        rows = [slice(r * PER_RANK, (r + 1) * PER_RANK) for r in range(world)]
        net.zero_grad(set_to_none=True)
        loss = _loss(net, x[rows[rank]], y[rows[rank]])
        loss.backward()
        _sgd(net.parameters())
        for h in hooks:
            h.remove()
        hooks = []

        grads, ref_losses = {}, []
        for r in rows:                                      # each rank's backward, in turn
            compute.zero_grad(set_to_none=True)
            ref_losses.append(_loss(compute, x[r], y[r]))
            ref_losses[-1].backward()
            for name, p in compute.named_parameters():
                if p.grad is not None:                      # 16-bit gradient -> fp32, summed
                    grads[name] = grads.get(name, 0) + p.grad.float()
        for name, p in master.named_parameters():
            if name in grads:
                p.grad = grads[name] / world                # fp32 average: the reduce-scatter
        _sgd(master.parameters())
        if dtype:
            with torch.no_grad():
                for c, m in zip(compute.parameters(), master.parameters()):
                    c.copy_(m)                              # master -> 16-bit copy
        plain.zero_grad(set_to_none=True)
        (sum(_loss(plain, x[r], y[r]) for r in rows) / world).backward()
        _sgd(plain.parameters())

        got, want, fp32 = _params(net), _params(master), _params(plain)
        assert got.keys() == want.keys(), (sorted(got), sorted(want))
        out["param_diffs"].append(max((got[k] - want[k]).abs().max().item() for k in want))
        out["loss_diffs"].append(abs(loss.item() - ref_losses[rank].item()))
        out["plain_diffs"].append(max((got[k] - fp32[k]).abs().max().item() for k in fp32))
    out["moved"] = max((want[k] - start[k]).abs().max().item() for k in want)
    out["compute_dtypes"] = sorted(compute_seen)
    return out


@contextmanager
def _wire_dtypes(seen: dict):
    """Record the dtype of every call FSDP2's default all-gather and reduce-scatter make
    (torch 2.13's DefaultAllGather/DefaultReduceScatter call these two functions of
    torch.distributed, looked up at call time)."""
    names = ("all_gather_single", "reduce_scatter_single")
    originals = {n: getattr(dist, n) for n in names}

    def recording(name):
        def call(output, input, *args, **kwargs):
            seen.setdefault(name, set()).add(str(input.dtype))
            return originals[name](output, input, *args, **kwargs)
        return call
    try:
        for n in names:
            setattr(dist, n, recording(n))
        yield seen
    finally:
        for n, f in originals.items():
            setattr(dist, n, f)


def _compute_dtype(net) -> tuple[set[str], list]:
    """The dtype each Linear's weight has while its forward runs (FSDP2's unsharded one)."""
    seen: set[str] = set()
    hooks = [m.register_forward_pre_hook(lambda m, _: seen.add(str(m.weight.dtype)))
             for m in net.modules() if isinstance(m, torch.nn.Linear)]
    return seen, hooks


def train_and_compare(payload: dict, ctx) -> dict:
    """Every case in ``payload["cases"]``: name -> {"strategy", "param_dtype", "model"}; each
    also reports the dtypes FSDP2 put on the wire (``wire``)."""
    torch.set_num_threads(1)
    out = {}
    for name, case in payload["cases"].items():
        with _wire_dtypes({}) as seen:
            out[name] = _case(ctx, case)
        out[name]["wire"] = {k: sorted(v) for k, v in seen.items()}
    return out

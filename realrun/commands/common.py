"""Flags that ``profile``, ``bench`` and ``validate`` share: which model, at what batch.

A preset (``--model``, with shrink flags) or your own model (``--module FILE.py:FN``, see
realrun/workload.py for the contract). Shrink flags replace a preset's dims so it runs on a
CPU, and name the result the way simddp does, so simulated and measured runs of the same model
share a name::

    --model transformer-small --layers 2 --d-model 384   ->  transformer-small[d_model=384,layers=2]

Default model: mlp-8x1024 (eight bias-free 1024×1024 layers, 8 × 4 MiB of fp32 gradients) at
batch 2 × seq 8 per rank — small enough that a default ``python -m realrun bench``
(10 configurations × 35 steps, 2 ranks) takes about a minute on a CPU box, and bucket caps of
1, 10 and 100 MB give 8, 3 and 1 all-reduces.
"""
from __future__ import annotations

import argparse
import os

from realrun.configs import HOST_TURNS
from simddp.planning.sharding import PRECISIONS
from simddp.errors import InputError
from simddp.presets.models import ModelSpec, parse_model

DEFAULT_MODEL = "mlp-8x1024"
DEFAULT_BATCH, DEFAULT_SEQ = 2, 8
# Which shrink flags change which family (the others have no such dim).
SHRINK_FLAGS = ("layers", "d_model", "d_ff", "heads", "vocab")
APPLIES = {"transformer": set(SHRINK_FLAGS), "mlp": {"layers", "d_model"},
           "ffn": {"layers", "d_model", "d_ff"}}
PRESETS_HELP = ("a preset: transformer-small|medium|large|xl|2.7b, mlp-DEPTHxWIDTH, "
                "ffn-LAYERSxDMODELxDFF")


def add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--model", default=None,
                   help=f"{PRESETS_HELP} (default {DEFAULT_MODEL}). Presets only: a profile "
                        "FILE.json has sizes and times but no torch module to run")
    g.add_argument("--module", metavar="FILE.py:FN", default=None,
                   help="your own model instead of a preset: FN() returns (model, inputs) or "
                        "(model, inputs, loss_fn), one rank's micro-batch; also "
                        "package.module:FN (docs/REALRUN.md, 'Your own model')")
    g.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="fp32, tf32 (matmuls on TF32 tensor cores; fp32 on CPU) or bf16 "
                        "(torch.autocast; fsdp and zero2 also under FSDP2's "
                        "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), Gloo "
                        "too) (default %(default)s)")
    g.add_argument("--layers", type=int, help="shrink: number of layers/blocks")
    g.add_argument("--d-model", type=int, help="shrink: model width (all families)")
    g.add_argument("--d-ff", type=int, help="shrink: FFN hidden width (transformer, ffn)")
    g.add_argument("--heads", type=int, help="shrink: attention heads (transformer)")
    g.add_argument("--vocab", type=int, help="shrink: vocabulary size (transformer)")
    g.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                   help="samples per rank (default %(default)s)")
    g.add_argument("--seq", type=int, default=DEFAULT_SEQ,
                   help="tokens (transformer) or rows (mlp, ffn) per sample (default %(default)s)")
    g.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"),
                   help="optimizer whose step is run and timed (default %(default)s)")
    g.add_argument("--threads", type=int, default=1,
                   help="intra-op threads per rank (torch.set_num_threads; default %(default)s)")
    g.add_argument("--seed", type=int, default=0,
                   help="weights seed; rank r's batch uses seed + r (default %(default)s)")


def add_host_turns_arg(group) -> None:
    """``--host-turns N`` of profile and validate (the profile phase's host-cost timing)."""
    group.add_argument("--host-turns", type=int, default=HOST_TURNS, metavar="N",
                       help="the profile's turns of 3 steps per DDP implementation when timing "
                            "their host costs, its longest phase (about half of it); fewer is "
                            "quicker and noisier (default %(default)s)")


def resolve_workload(args: argparse.Namespace):
    """What to run: --module (checked: FN is called once here, so a bad one fails before any
    rank starts) or the preset of --model with its shrink flags; InputError otherwise."""
    for flag in ("batch", "seq", "threads"):
        require_int(f"--{flag}", getattr(args, flag))
    from realrun.workload import Workload, check  # torch: only once the cheap checks passed
    if args.module is None:
        return Workload.preset(resolve_spec(args), args.batch, args.seq)
    if args.model is not None:
        raise InputError(f"--model {args.model} and --module {args.module}: give one of them")
    given = [f for f in SHRINK_FLAGS if getattr(args, f) is not None]
    if given:
        raise InputError(f"--{given[0].replace('_', '-')} shrinks a preset; your --module "
                         "builds its own model")
    workload = Workload.from_target(args.module)
    check(workload, args.seed)
    return workload


def resolve_spec(args: argparse.Namespace) -> ModelSpec:
    """The preset named by --model with the shrink flags applied; InputError otherwise."""
    if args.model is None:
        args.model = DEFAULT_MODEL
    if args.model.endswith(".json") or os.sep in args.model:
        raise InputError(f"--model {args.model!r}: a profile file has no torch module to run; "
                         f"choose {PRESETS_HELP}")
    spec = parse_model(args.model)
    dims = {}
    for field in SHRINK_FLAGS:
        value = getattr(args, field)
        if value is None:
            continue
        flag = "--" + field.replace("_", "-")
        require_int(flag, value)
        if field not in APPLIES[spec.kind]:
            accepted = ", ".join("--" + f.replace("_", "-") for f in SHRINK_FLAGS
                                 if f in APPLIES[spec.kind])
            raise InputError(f"{flag} does not apply to {args.model} ({spec.kind}); "
                             f"its shrink flags are {accepted}")
        dims[field] = value
    for flag in ("batch", "seq", "threads"):
        require_int(f"--{flag}", getattr(args, flag))
    return spec.shrunk(**dims)


def require_int(flag: str, value: int, minimum: int = 1, why: str = "") -> None:
    if not isinstance(value, int) or value < minimum:
        raise InputError(f"{flag} must be an integer >= {minimum}, got {value!r}"
                         + (f" ({why})" if why else ""))

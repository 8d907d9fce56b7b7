"""Import torch.profiler traces of a real data-parallel job: a profile, a link, a summary.

    python -m simddp trace-import traces/rank0.json traces/rank1.json --out out/trace
    python -m simddp trace-import traces/*.pt.trace.json.gz --out out/trace --step-ms 41.3
    python -m simddp sweep --model out/trace/profile.json --link out/trace/link.json \\
        --strategies ddp --bucket-mb 1,4,16,64
    python -m simddp trace-import gpu0.pt.trace.json --link ib-8xndr --out out/one-gpu
    python -m simddp sweep --model out/one-gpu/profile.json --link ib-8xndr --world-size 64

One Chrome trace per rank (``prof.export_chrome_trace`` or ``tensorboard_trace_handler``),
recorded with ``record_shapes=True`` over at least one whole training step of a job under
torch's DistributedDataParallel or realrun.DDP (also with ``no_sync()`` accumulation), or
torch FSDP2 on CPU: CPU with Gloo, or CUDA with NCCL (then also ``ProfilerActivity.CUDA``).
A trace of one GPU (NCCL, world size 1) gives the gradients and their ready times but no
network: ``--link`` names the one to predict with; a multi-rank trace whose sizes cannot
pin the link down uses ``--link`` (else a preset) and says so. docs/TRACES.md says how to
record one and what is derived how.

    python -m simddp trace-import traces/fsdp.rank*.json --out out/fsdp
    python -m simddp sweep --model out/fsdp/profile.json --link out/fsdp/link.json \
        --world-size 2 --strategies fsdp,zero2,ddp --shard-unit-mb 1

Writes OUT/profile.json (simddp.profile/1, with the traced implementation's launch cost as
its host_costs), OUT/link.json (simddp.link/2) and OUT/summary.json, and prints the summary:
steps, phases, the compute's basis (CPU: host-timed, the profiler's cost removed; CUDA: the
kernels' time on the GPU, and how long the GPU sat idle waiting for the host), gradients,
collectives and their sizes, the fitted link and contention, and the traced
configuration's step time, measured and re-simulated. Torch is not needed (``--module``
runs your file, which imports it). A trace that lacks what is needed: one line, exit 2,
nothing written.
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from simddp.errors import InputError
from simddp.inputs.io import link_to_json, profile_to_json, write_atomic
from simddp.report.outdir import check_out_dir

HELP = "import torch.profiler traces of a real job into a profile and a link"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help="one Chrome trace per rank (.json or .json.gz)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="write profile.json, link.json and summary.json here")
    p.add_argument("--force", action="store_true",
                   help="replace files in --out (default: move an earlier import's files "
                        "into --out/earlier-<time>/; refuse another command's results)")
    g = p.add_argument_group("what the trace cannot say (all optional)")
    g.add_argument("--bucket-mb", type=float, default=None, metavar="MB",
                   help="the traced bucket_cap_mb (default: inferred from the buckets)")
    g.add_argument("--implementation", choices=("torch", "realrun"), default=None,
                   help="the traced DDP (default: torch if its reducer's ops are in the "
                        "trace, else realrun)")
    g.add_argument("--step-ms", type=float, default=None, metavar="MS",
                   help="the job's step time without the profiler (its log), at the traced "
                        "configuration: compute is scaled to match it (CPU traces: the "
                        "profiler's own cost; CUDA traces: host work the GPU waits for in "
                        "every step, which no kernel holds; docs/TRACES.md)")
    g.add_argument("--module", default=None, metavar="FILE.py:FN",
                   help="your model (realrun's contract: FN() returns (model, inputs[, "
                        "loss_fn])), for parameter names; runs your file, which needs torch")
    g.add_argument("--alpha-us", type=float, default=None, metavar="US",
                   help="α of one all-reduce, µs, where the traced sizes cannot tell it from "
                        "bandwidth (torch DDP traced at 1 MB: its buckets all alike): "
                        "alpha_us of python -m calibrate's link.json on the same cluster; "
                        "busbw and contention are still fitted (not for FSDP2 traces)")
    g.add_argument("--name", default=None, help="the profile's name (default: the trace's)")
    g.add_argument("--link", default=None, metavar="PRESET|FILE.json",
                   help="the network to predict with (python -m simddp links, or a link.json "
                        "from python -m calibrate): required for a one-rank trace (one GPU, "
                        "world size 1), whose all-reduces move nothing; for a multi-rank trace, "
                        "used only where its sizes cannot pin α and busbw down within "
                        "physical bounds (the summary says; default: a preset)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table for people, json (summary.json on stdout) for scripts")


def run(args: argparse.Namespace) -> int:
    # Everything is checked, and every output rendered, before anything is written.
    for flag, value in (("--bucket-mb", args.bucket_mb), ("--step-ms", args.step_ms)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise InputError(f"{flag} must be a number > 0, got {value!r}")
    if args.alpha_us is not None and not (math.isfinite(args.alpha_us) and args.alpha_us >= 0):
        raise InputError(f"--alpha-us must be a number >= 0, got {args.alpha_us!r}")
    check_out_dir(args.out)  # only that it is writable: the traces may take a while
    from simddp.ingest.trace import import_traces
    from simddp.ingest.trace.summary import render_summary, summary

    link = None
    if args.link is not None:
        from simddp.inputs.io import load_link_file
        from simddp.presets import get_link
        link = load_link_file(args.link) if args.link.endswith(".json") else get_link(args.link)
    imp = import_traces(args.traces, bucket_mb=args.bucket_mb,
                        implementation=args.implementation, name=args.name,
                        step_s=None if args.step_ms is None else args.step_ms / 1e3, link=link,
                        alpha_s=None if args.alpha_us is None else args.alpha_us / 1e6)
    if len(imp.timelines) < imp.world_size:  # a rank left out may be the slow one
        print(f"warning: {len(imp.timelines)} trace(s) of a {imp.world_size}-rank job: the "
              "profile and link describe only those ranks; pass one trace per rank",
              file=sys.stderr)
    profile = imp.profile
    if args.module is not None:
        from simddp.ingest.trace.names import module_parameters, name_gradients
        profile = name_gradients(profile, imp.derived.grad_shapes,
                                 module_parameters(args.module))
    doc = summary(imp)
    profile_doc = profile_to_json(profile, host=imp.host)
    # "device": what simddp sweep reads to know the compute ran on a GPU (its contention
    # default: simddp/predict/resolve.py)
    profile_doc["measured"] = {"source": "simddp trace-import", "device": doc["device"],
                               "backend": doc["backend"], "traces": args.traces,
                               "granularity": imp.granularity,
                               "granularity_why": doc["gradients"]["why"],
                               "steps": doc["steps"]["count"], "profiler": doc["profiler"],
                               "step_ms": doc["step_ms"],
                               "grad_shapes_ready_order": [
                                   None if s is None else list(s)
                                   for s in imp.derived.grad_shapes]}
    files = {"profile.json": profile_doc, "link.json": link_to_json(imp.link_file),
             "summary.json": doc}
    out_dir = check_out_dir(args.out, files=("summary.json",), force=args.force)
    for name, data in files.items():
        write_atomic(out_dir / name, json.dumps(data, indent=1) + "\n")
    print(f"wrote {', '.join(str(out_dir / n) for n in files)}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(doc, indent=1))
    else:
        print(render_summary(doc, out_dir=str(out_dir)))
    return 0

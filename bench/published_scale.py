"""Published runs at scale, each predicted from one anchor row of its own: how far off, and why.

    python bench/published_scale.py                        # both parts
    python bench/published_scale.py --part llm-foundry     # MosaicML's MPT tables, 8 → 512 GPUs
    python bench/published_scale.py --part comm-bound      # DDP over one NIC per node, 10 GbE
    python bench/published_scale.py --nccl-ring-latency    # llm-foundry, the variant below

**llm-foundry** (tests/data/published-scale/llm-foundry-throughput.json; SOURCES.md). Every
row that has an 8-GPU row of the same model and settings (GPU, precision and FSDP mixed
precision, sequence length, micro-batch, activation checkpointing, sharding) is predicted from
that 8-GPU row only, through ``simddp scale``'s own path (simddp.predict.scaling.scale):

- the model: its ``mpt:`` spec (tests/data/hf-configs/llm-foundry-mpt.json, NumParams exact),
  on the a100 or h100 preset, the row's micro-batch, sequence and checkpointing;
- the compute: the one-GPU step that makes the simulated 8-GPU optimizer step (the anchor's
  accumulation steps) equal the anchor's measured one (``--step-ms``, solved by brentq);
- FSDP as Composer ran it with torch 1.13 (mosaicml/composer composer/trainer/mosaic_fsdp.py
  @ 281844ca81a6d2733f5a314a4589acba98dcec9f, ``get_mixed_precision``): ``DEFAULT`` keeps the
  parameters fp32 (all-gathers in fp32) and reduces in bf16, ``PURE`` does both in bf16;
  FULL_SHARD is fsdp, SHARD_GRAD_OP zero2; a unit per MPT block; every micro-step gathers and
  reduce-scatters (Composer's ``ddp_sync_context`` leaves FSDP alone);
- the links, the same for every row: ``simddp scale``'s default NVLink preset inside a node
  (nvlink-a100, nvlink-h100) and between nodes the cluster's fabric. The A100 tables name
  "1600 Gbps node-node interconnect (RoCE)": 8 ports of 200 Gb/s at the ib-hdr preset's
  per-port busbw (22 GB/s, ~88 % of the wire) with the 4-NIC preset's α (ib-4xhdr). The H100
  tables name none: ASSUMED ib-8xndr (8 × 400 Gb/s NDR, the H100 reference node) for every
  H100 row. 8 GPUs a node everywhere (the smallest run is 8 GPUs; the README does not say);
- contention: ``simddp scale``'s default (the published GPU figures), no per-dataset knob.

Each row: measured and predicted tokens/s/GPU and the error; then the median and max.
``--nccl-ring-latency``: the link between nodes at p ranks takes, per kind, NCCL's own
latency of a Simple-protocol ring (baseLat + hops × hwLat, NVLink hops 3.4 µs, network hops
14 µs; NVIDIA/nccl src/graph/tuning.cc) where it exceeds the preset's α: a diagnostic of how
much of the loss at 256–512 GPUs a ring's growing latency explains, not a default.

**comm-bound**: multi-node DDP where the network decides the step.
- Baskerville (baskerville-gpt2-ddp-1nic.json): GPT-2 Large as minGPT builds it for
  lightning-GPT's character-level Shakespeare (36 layers, 1280 wide, vocab 65, untied head,
  biases: 708.7 M parameters, the post's ~708M; CharDataset block_size 128, batch 16 a GPU:
  35,453 samples of shakespeare_input.txt give the post's 2,216 steps an epoch on 1 GPU) under
  PyTorch Lightning DDP (torch DDP, 25 MB buckets, bf16 autocast: fp32 gradients). The anchor:
  the 1-GPU step (epoch time / steps). The link between nodes: the post's own all-reduce
  benchmark at the same nodes × GPUs (708 M bf16 elements, its time read from its "transfer
  speed" of 2(p−1)·MiB/s), its forced-ring row where it printed one (torch DDP's all-reduces
  are the ring law's, and the ring law wants a ring measurement: docs/TOPOLOGY.md), with the
  ib-hdr preset's α; nvlink-a100 inside. Also shown: the ib-hdr preset between nodes (one HDR
  port a node, as the post says) and the default link with no contention.
- 10 GbE (ethernet-10gbe-resnet50-4x3090.json): ResNet-50 (torchvision's 25,557,032
  parameters, fp32 gradients) on 4 nodes of one RTX 3090 (the author's rounding) over one
  10 GbE port each (eth-10g), its all-reduce after backward (XLA; the profile shows no
  overlap: flat). The anchor: the single-GPU step, 230 ms; measured: 234 ms compute + 106 ms
  all-reduce.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from scipy.optimize import brentq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from simddp.cli.args import one_gpu_step  # noqa: E402
from simddp.inputs.link import KindFit, Link  # noqa: E402
from simddp.inputs.profile import Layer, ModelProfile  # noqa: E402
from simddp.planning.sharding import cast_rate  # noqa: E402
from simddp.predict.scaling import ScaleRequest, clusters, scale  # noqa: E402
from simddp.presets.devices import get_device  # noqa: E402
from simddp.presets.hf_config import from_spec  # noqa: E402
from simddp.presets.links import get_link  # noqa: E402
from simddp.presets.models import build_profile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "published-scale"
MPT = ROOT / "tests" / "data" / "hf-configs" / "llm-foundry-mpt.json"
GPUS_PER_NODE = 8
DEVICE = {"a100_40gb": "a100", "a100_80gb": "a100", "h100_80gb": "h100"}
SHARDING = {"FULL_SHARD": "fsdp", "SHARD_GRAD_OP": "zero2"}
# what makes two rows "the same model and settings" (the GPU count and accumulation aside)
SETTINGS = ("Model", "GPU", "Precision", "MP Mode", "SeqLen (T)", "MicroBatchSize",
            "Activation Checkpointing", "Activation CPUOffload", "Sharding Strategy")
# NCCL's latency model of a ring, Simple protocol (NVIDIA/nccl src/graph/tuning.cc): base,
# per hop inside a node (NVLink), per hop between nodes (network); µs
NCCL_RING_BASE_US, NCCL_RING_NVLINK_US, NCCL_RING_NET_US = 8.4, 3.4, 14.0


def roce_1600() -> Link:
    """The A100 tables' "1600 Gbps node-node interconnect (RoCE)" from the presets' figures:
    8 ports of 200 Gb/s at ib-hdr's per-port busbw, α of the 4-NIC preset."""
    port, multi = get_link("ib-hdr"), get_link("ib-4xhdr")
    return Link("roce-8x200g", multi.alpha_s, 8 * port.busbw_gbps, backend="nccl",
                source="1600 Gb/s a node as 8 × 200 Gb/s ports at the ib-hdr preset's per-port "
                       "busbw (~88 % of the wire), α of ib-4xhdr")


def inter_link(gpu: str) -> Link:
    return roce_1600() if gpu.startswith("a100") else get_link("ib-8xndr")


# --- llm-foundry ----------------------------------------------------------------------------

def foundry_rows() -> list[dict]:
    """Every table row as a dict of its columns, with its table's title."""
    doc = json.loads((DATA / "llm-foundry-throughput.json").read_text(encoding="utf-8"))
    return [dict(zip(t["columns"], row), table=t["title"]) for t in doc["tables"]
            for row in t["rows"]]


def settings(row: dict) -> tuple:
    return tuple(row[c] for c in SETTINGS)


def pairs(rows: list[dict] | None = None) -> list[tuple[dict, dict]]:
    """(8-GPU anchor, row) for every row of another GPU count that has one."""
    rows = foundry_rows() if rows is None else rows
    anchors = {settings(r): r for r in rows if r["# GPUs"] == "8"}
    return [(anchors[settings(r)], r) for r in rows
            if r["# GPUs"] != "8" and settings(r) in anchors]


def mpt_spec(model: str, seq: int) -> str:
    m = json.loads(MPT.read_text(encoding="utf-8"))["models"][model]
    return (f"mpt:d_model={m['d_model']},n_heads={m['n_heads']},n_layers={m['n_layers']},"
            f"expansion_ratio={m['expansion_ratio']},max_seq_len={seq},"
            f"vocab_size={m['vocab_size']}")


@dataclass(frozen=True)
class Job:
    """One row's job as ``simddp scale`` takes it: the model's roofline profile (not yet
    anchored), the request (strategy, micro-batch, accumulation, precision), the links."""

    profile: ModelProfile
    request: ScaleRequest
    intra: Link
    inter: Link
    gpus: int
    tokens_per_s_per_gpu: float


def job_of(row: dict) -> Job:
    device = DEVICE[row["GPU"]]
    seq, mb = int(row["SeqLen (T)"]), int(row["MicroBatchSize"])
    profile = build_profile(from_spec(mpt_spec(row["Model"], seq)), device, mb, seq,
                            checkpointing=row["Activation Checkpointing"] == "True")
    pure = row["MP Mode"] == "PURE"     # parameters gathered in bf16 too
    cast_gbps = cast_rate(None, get_device(device).mem_gbps, device)[0] if pure else None
    request = ScaleRequest((SHARDING[row["Sharding Strategy"]],), mb, seq,
                           accum_steps=int(row["GradAccum"]),
                           precision="bf16" if pure else "fp32", cast_gbps=cast_gbps,
                           grad_dtype="bf16")
    return Job(profile, request, get_link(f"nvlink-{device}"), inter_link(row["GPU"]),
               int(row["# GPUs"]), float(row["Throughput (T/s/GPU)"]))


def nccl_ring_link(link: Link, gpus: int) -> Link:
    """``link`` at ``gpus`` ranks (whole nodes) with each kind's α at least NCCL's latency of
    a Simple-protocol ring there (see the module text)."""
    nodes = max(1, gpus // GPUS_PER_NODE)

    def ring_s(kind: str) -> float:
        steps = 2 * (gpus - 1) if kind == "all_reduce" else gpus - 1
        inter = (2 * nodes if nodes > 1 else 0) if kind == "all_reduce" else nodes - 1
        return (NCCL_RING_BASE_US + (steps - inter) * NCCL_RING_NVLINK_US
                + inter * NCCL_RING_NET_US) / 1e6

    fits = {k: KindFit(max(link.alpha_s, ring_s(k)), link.busbw_gbps)
            for k in ("all_gather", "reduce_scatter")}
    return replace(link, alpha_s=max(link.alpha_s, ring_s("all_reduce")), kind_fits=fits)


def predicted_tokens(job: Job, profile: ModelProfile, gpus: int, ring_latency: bool = False):
    """The ScaleRow of ``job`` at ``gpus`` GPUs on ``profile``."""
    inter = nccl_ring_link(job.inter, gpus) if ring_latency and gpus > GPUS_PER_NODE \
        else job.inter
    answer = scale(profile, inter, clusters([gpus], GPUS_PER_NODE, job.intra), job.request)
    return answer.rows[0]


def anchored(anchor: Job) -> ModelProfile:
    """The anchor's profile scaled (one factor, as ``--step-ms``) so that its simulated 8-GPU
    optimizer step gives exactly its measured tokens/s/GPU."""
    base = anchor.profile
    total_ms = (base.forward_s + base.backward_s + base.optimizer_s) * 1e3

    def miss(step_ms: float) -> float:
        row = predicted_tokens(anchor, one_gpu_step(base, step_ms), anchor.gpus)
        return row.tokens_per_s_per_gpu / anchor.tokens_per_s_per_gpu - 1

    step_ms = brentq(miss, total_ms / 20, total_ms * 20, xtol=1e-9, rtol=1e-12)
    return one_gpu_step(base, step_ms)


def predict_foundry(ring_latency: bool = False) -> list[dict]:
    """Every anchored row: measured and predicted tokens/s/GPU, the anchor's, the error."""
    out, cache = [], {}
    for anchor_row, row in pairs():
        anchor = job_of(anchor_row)
        key = settings(anchor_row)
        if key not in cache:
            cache[key] = anchored(anchor)
        target = job_of(row)
        got = predicted_tokens(target, cache[key], target.gpus, ring_latency)
        out.append({"row": row, "anchor": anchor_row, "predicted": got.tokens_per_s_per_gpu,
                    "measured": target.tokens_per_s_per_gpu,
                    "exposed_comm_ms": got.exposed_comm_ms, "step_ms": got.step_ms,
                    "error": got.tokens_per_s_per_gpu / target.tokens_per_s_per_gpu - 1})
    return out


def report_foundry(results: list[dict], out=sys.stdout) -> dict:
    print(f"llm-foundry: {len(results)} rows with an 8-GPU anchor of the same settings; links: "
          "nvlink-a100 / nvlink-h100 in a node, between nodes roce-8x200g (A100, the tables' "
          "1600 Gbps RoCE) / ib-8xndr (H100: not stated, assumed); 8 GPUs a node", file=out)
    print(f"{'GPU':10} {'model':5} {'seq':>5} {'mb':>3} {'MP':7} {'ckpt':4} {'acc':>7} "
          f"{'GPUs':>4} {'anchor':>8} {'measured':>8} {'predicted':>9} {'error':>7} "
          f"{'exp. comm ms':>12}", file=out)
    for r in results:
        row, a = r["row"], r["anchor"]
        print(f"{row['GPU']:10} {row['Model']:5} {row['SeqLen (T)']:>5} "
              f"{row['MicroBatchSize']:>3} {row['MP Mode']:7} "
              f"{row['Activation Checkpointing'][0]:4} "
              f"{a['GradAccum'] + '→' + row['GradAccum']:>7} {row['# GPUs']:>4} "
              f"{float(a['Throughput (T/s/GPU)']):8.0f} {r['measured']:8.0f} "
              f"{r['predicted']:9.0f} {r['error']:+7.1%} {r['exposed_comm_ms']:12.1f}", file=out)
    errs = [abs(r["error"]) for r in results]
    summary = {"rows": len(results), "median": statistics.median(errs), "max": max(errs)}
    flat = [abs(float(r["anchor"]["Throughput (T/s/GPU)"]) / r["measured"] - 1) for r in results]
    print(f"  tokens/s/GPU error: median {summary['median']:.1%}, max {summary['max']:.1%} "
          f"over {len(results)} rows (the anchor's own throughput as the prediction: median "
          f"{statistics.median(flat):.1%}, max {max(flat):.1%})", file=out)
    return summary


# --- communication-bound --------------------------------------------------------------------

GPT2_LARGE = ("decoder:hidden=1280,layers=36,heads=20,ffn=5120,vocab=65,seq=128,mlp=gelu,"
              "norm=layernorm,pos=learned,bias=true,tied=false")
BASKERVILLE_STEPS_1GPU = 2216     # the post's steps an epoch on one GPU (batch 16 a GPU)
BENCH_ELEMENTS = 708_000_000      # bench_allreduce.py's default --tensor-size, bf16
RESNET50_PARAMS = 25_557_032      # torchvision.models.resnet50


def baskerville() -> dict:
    return json.loads((DATA / "baskerville-gpt2-ddp-1nic.json").read_text(encoding="utf-8"))


def bench_link(d: dict, nodes: int, per_node: int) -> Link:
    """The post's own all-reduce at ``nodes`` × ``per_node`` as a ring's busbw: its forced-ring
    row where it printed one (the ring law wants a ring measurement, docs/TOPOLOGY.md), else
    NCCL's default; its time from its transfer speed of 2(p−1)·MiB/s (GiB/s); α of ib-hdr."""
    p = nodes * per_node
    rows = [b for b in d["allreduce_benchmark"]["rows"]
            if (b["nodes"], b["gpus_per_node"]) == (nodes, per_node)
            and b.get("protocol", "NCCL") == "NCCL" and "Ethernet" not in b.get("backend", "")]
    ring = [b for b in rows if b.get("NCCL_ALGO") == "Ring"]
    row = (ring or [b for b in rows if "NCCL_ALGO" not in b])[0]
    mib = BENCH_ELEMENTS * 2 / 2**20
    seconds = mib * 2 * (p - 1) / (row["transfer_GBps"] * 1024)
    busbw = 2 * (p - 1) / p * BENCH_ELEMENTS * 2 / seconds / 1e9
    name = f"post-{'ring' if ring else 'nccl'}-{nodes}x{per_node}"
    return Link(name, get_link("ib-hdr").alpha_s, busbw, backend="nccl")


def predict_baskerville(contention=None, preset: bool = False) -> list[dict]:
    """GPT-2 Large's multi-node rows: measured and predicted step per optimizer step, ms."""
    d = baskerville()
    rows = [r for r in d["rows"] if r["model"] == "gpt2-large"]
    one = next(r for r in rows if r["nodes"] * r["gpus_per_node"] == 1)
    one_ms = one["epoch2_time_s"] / BASKERVILLE_STEPS_1GPU * 1e3
    profile = one_gpu_step(build_profile(from_spec(GPT2_LARGE), "a100", 16, 128), one_ms)
    out = []
    for r in rows:
        nodes, per_node = r["nodes"], r["gpus_per_node"]
        if nodes == 1:
            continue
        gpus = nodes * per_node
        link = get_link("ib-hdr") if preset else bench_link(d, nodes, per_node)
        answer = scale(profile, link, clusters([gpus], per_node, get_link("nvlink-a100")),
                       ScaleRequest(("ddp",), 16, 128), contention=contention)
        measured_ms = r["epoch2_time_s"] / (BASKERVILLE_STEPS_1GPU / gpus) * 1e3
        out.append({"run": f"baskerville gpt2-large {nodes}x{per_node}", "link": link.name,
                    "measured_ms": measured_ms, "predicted_ms": answer.rows[0].step_ms})
    return out


def predict_ethernet() -> list[dict]:
    """ResNet-50 on 4 single-GPU nodes over 10 GbE, all-reduce after backward."""
    d = json.loads((DATA / "ethernet-10gbe-resnet50-4x3090.json").read_text(encoding="utf-8"))
    text = {r["config"]: r.get("measured", "") for r in d["rows"]}
    one_ms = float(re.search(r"T_s = (\d+) ms", text["1 GPU, bfloat16"]).group(1))
    base = text["4 nodes x 1 GPU, one 10GbE port each, fp32 gradients (baseline)"]
    measured_ms = sum(float(re.search(rf"{k} = (\d+) ms", base).group(1)) for k in ("T_s", "T_c"))
    layer = Layer("resnet50", (RESNET50_PARAMS * 4,), one_ms / 3e3, 2 * one_ms / 3e3)
    answer = scale(ModelProfile("resnet50", (layer,)), get_link("eth-10g"),
                   clusters([4], 1, get_link("eth-10g")), ScaleRequest(("flat",), 1))
    return [{"run": "10GbE resnet50 4x1", "link": "eth-10g", "measured_ms": measured_ms,
             "predicted_ms": answer.rows[0].step_ms}]


def report_comm_bound(out=sys.stdout) -> dict:
    default = predict_baskerville() + predict_ethernet()
    preset = {r["run"]: r for r in predict_baskerville(preset=True) + predict_ethernet()}
    calm = {r["run"]: r for r in predict_baskerville(contention="none") + predict_ethernet()}
    print("\ncommunication-bound multi-node runs: step per optimizer step, ms", file=out)
    print(f"{'run':32} {'link':14} {'measured':>8} {'default':>8} {'error':>7} "
          f"{'ib-hdr':>8} {'error':>7} {'no cont.':>8} {'error':>7}", file=out)
    for r in default:
        p, c = preset[r["run"]], calm[r["run"]]
        cells = [f"{x['predicted_ms']:8.1f} {x['predicted_ms'] / r['measured_ms'] - 1:+7.1%}"
                 for x in (r, p, c)]
        print(f"{r['run']:32} {r['link']:14} {r['measured_ms']:8.1f} {' '.join(cells)}",
              file=out)
    summary = {}
    for key, rows in (("default", default), ("ib-hdr", list(preset.values())),
                      ("no contention", list(calm.values()))):
        errs = [abs(x["predicted_ms"] / x["measured_ms"] - 1) for x in rows]
        summary[key] = (statistics.median(errs), max(errs))
        print(f"  {key:14}: median {summary[key][0]:.1%}, max {summary[key][1]:.1%} over "
              f"{len(errs)} rows", file=out)
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("all", "llm-foundry", "comm-bound"), default="all")
    ap.add_argument("--nccl-ring-latency", action="store_true",
                    help="llm-foundry with NCCL's ring latency between nodes (a diagnostic)")
    args = ap.parse_args(argv)
    if args.part in ("all", "llm-foundry"):
        report_foundry(predict_foundry(args.nccl_ring_latency))
    if args.part in ("all", "comm-bound"):
        report_comm_bound()
    return 0


if __name__ == "__main__":
    sys.exit(main())

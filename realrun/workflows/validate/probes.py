"""Probes: the link and host costs, measured round-robin with the strategies they predict.

Parameters measured in a separate phase carry a shared box's drift into every prediction
(docs/FINDINGS.md#drift-and-the-compute-only-anchor), so ``realrun validate`` hands these to
``realrun bench`` as extras (:func:`make_probe`), timed in the same rounds as the strategies:

====================  =====================================================================
probe:flat            one all-reduce of all the model's gradient bytes, as one buffer
probe:seq-blocking    the model's gradients all-reduced one by one, each waited for
probe:copy            the wrapper's copies of every gradient into a bucket (× 1/p) and back
probe:scale           a lone gradient's in-place 1/p, over every gradient
probe:solo-wrapper    a training step under realrun.DDP("overlap") on this rank's own 1-rank
                      group: the wrapper's host costs with no one to wait for
probe:solo-bucket     the same with all gradients in one bucket (one collective)
probe:solo-torch      the same under torch's DistributedDataParallel
probe:contention      the model's forward + backward alone, its gradients' all-reduces alone,
                      then both at once: the link's compute and comm slowdowns
====================  =====================================================================

The sequences start after 20 ms of matmuls, as a step's all-reduces follow the backward.
:func:`inputs_from_probes` turns the medians into the link file's and the Host's fields: with
S the gradient bytes, N the tensors and b = S·2(p−1)/p/busbw,

    flat = α_b + b,   seq-blocking = N·α_b + b   ->   α_b = (seq − flat) / (N − 1), b
    (on a shaped link each less what its token bucket serves, as simddp charges them:
    calibrate.rig.shaped_chain.chain_and_whole)
    copy = 2S / copy_gbps,  scale = S / scale_gbps
    solo steps − compute-only − copies: N·hook + N·launch (overlap), N·hook + launch (one
    bucket), N·hook (torch)   ->   realrun's hook_s and launch_s, torch's hook_s

The α of overlapped all-reduces is not probed: it stays calibrate's lone α, as a queue's
total / N charges its start to every call (docs/FINDINGS.md#lone-alpha).
"""
from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from simddp.inputs.contention import Contention
from simddp.inputs.contention_measurement import combine_contention
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.link_file import LinkFile
from simddp.rig.gloo_shared_cpu import refill_share
from calibrate.ranks.allreduce import zeros
from realrun.launch.contention_timing import overlap_times
from calibrate.rig.sequence import timed_sequence
from calibrate.rig.shaped_chain import chain_and_whole
from realrun.configs import config_of
from realrun.steps import Trainer
from realrun.tensors import tensor_bytes
from realrun.ddp_host_costs import copy_passes, copy_rates, hook_fields, solo_trainer
from simddp.inputs.host import Host, HostCosts
from simddp.result import COMPUTE_ONLY
from simddp.planning.registry import TORCH_FSDP

PROBES = ("probe:flat", "probe:seq-blocking", "probe:copy",
          "probe:scale", "probe:solo-wrapper", "probe:solo-bucket", "probe:solo-torch",
          "probe:contention")
_SOLO = ("probe:solo-wrapper", "probe:solo-bucket", "probe:solo-torch")
HOST_PROBES = ("probe:copy", "probe:scale") + _SOLO  # the host costs; not run with free copies


def make_probe(name: str, workload, ctx, payload: dict, shared: dict):
    """realrun bench's ``extras_factory``: the probe ``name`` on this rank, a steppable with
    ``step()``, ``collectives()`` and ``inner_s`` (what a step timed, when only part counts).
    ``shared`` keeps the 1-rank groups, made once in the same order on every rank."""
    if name not in PROBES:
        raise ValueError(f"unknown probe {name!r}; expected one of {', '.join(PROBES)}")
    if name in _SOLO:
        return solo_trainer(name.removeprefix("probe:solo-"), workload, ctx, payload, shared)
    if name == "probe:contention":
        return ContentionProbe(workload, ctx, payload)
    return Probe(name, tensor_bytes(workload.build(payload["seed"], ctx.rank, "cpu")[0]), ctx)


class ContentionProbe:
    """The model's forward + backward against its own gradients' all-reduces: alone, then
    together; each step reports the four times in ``inner``."""

    def __init__(self, workload, ctx, payload: dict) -> None:
        self.trainer = Trainer(config_of(None), workload, ctx, payload)
        self.stream = [zeros(n, "float32", ctx.device)
                       for n in tensor_bytes(self.trainer.model)]
        self.ctx = ctx
        self.inner: dict = {}

    def compute(self) -> None:
        self.trainer.optimizer.zero_grad(set_to_none=True)
        self.trainer.loss().backward()

    def step(self, ranges: bool = False) -> None:
        keys = ("compute_alone_s", "comm_alone_s", "compute_together_s", "comm_together_s")
        self.inner = dict(zip(keys, overlap_times(self.compute, self.stream, self.ctx)))

    def collectives(self) -> int:
        return 0


class Probe:
    """A probe of the link or of the copies: all-reduces or copies of the model's gradients."""

    def __init__(self, kind: str, sizes: list[int], ctx) -> None:
        self.inner_s = None
        if kind in ("probe:copy", "probe:scale"):
            copy, in_place = copy_passes(sizes, ctx)
            self.step = copy if kind == "probe:copy" else in_place
            return
        if kind == "probe:flat":
            flat = torch.zeros(sum(sizes) // 4, device=ctx.device)
            self.step = lambda ranges=False: dist.all_reduce(flat)
            return
        grads = [torch.zeros(max(1, n // 4), device=ctx.device) for n in sizes]
        blocking = kind == "probe:seq-blocking"

        def step(ranges: bool = False) -> None:
            self.inner_s = timed_sequence(grads, blocking, ctx)
        self.step = step

    def collectives(self) -> int:
        return 0


def inputs_from_probes(link_file: LinkFile, host: Host | None, medians_s: dict[str, float],
                       tensor_bytes: list[int], world_size: int,
                       contention: list[dict] | None = None
                       ) -> tuple[LinkFile, Host | None, dict]:
    """``link_file`` and ``host`` with what the probes' medians (and ``contention``, the
    contention probe's per-rank medians) measured, and what was derived, for the report. A
    quantity whose probe is missing, or that comes out unphysical (≤ 0), keeps its value."""
    m = medians_s
    out: dict = {"medians_ms": {k: v * 1e3 for k, v in m.items()}}
    fields = _link_fields(link_file, m, tensor_bytes, world_size)
    if contention is not None:
        slowdowns, out["contention"] = _contention_fields(contention)
        fields.update(slowdowns)
    out["fields"] = dict(fields)
    out["calibrated"] = {k: _field(link_file, k) for k in fields}
    before = host or Host("none")
    probed = None if contention is None else (fields["compute_slowdown"],
                                              fields["comm_slowdown"])
    copy = _copy_rates(m, tensor_bytes, before)
    hooks_probed = COMPUTE_ONLY in m and "probe:solo-wrapper" in m
    if copy is not None and (_COPY_PROBES <= m.keys() or hooks_probed):
        host = _probed_host(before, copy, m if hooks_probed else None, tensor_bytes, probed)
        out["host"] = {impl: dataclasses.asdict(c) for impl, c in host.implementations.items()}
        out["host_before"] = {impl: dataclasses.asdict(c)
                              for impl, c in before.implementations.items()}
    elif probed is not None and host is not None:
        # the model's contention wins where a prediction resolves it: the in-run one too
        host = Host(host.name, host.implementations, host.source, contention=probed,
                    contention_spread=host.contention_spread,
                    compute_after_comm=host.compute_after_comm)
    return _probed_link_file(link_file, fields), host, out


_COPY_PROBES = {"probe:copy", "probe:scale"}
_GLOO_FIELDS = ("blocking_alpha_s", "blocking_refill_s")


def _field(link_file: LinkFile, name: str) -> float | None:
    """A probed field's value before the probes: the link's, Gloo's host's, the contention's."""
    if name in _GLOO_FIELDS:
        return None if link_file.host is None else getattr(link_file.host, name)
    if name.endswith("_slowdown"):
        c = link_file.contention
        return 1.0 if c is None else c.compute if name.startswith("compute") else c.comm
    return getattr(link_file.link, name)


def _probed_link_file(link_file: LinkFile, fields: dict) -> LinkFile:
    """A new link file from the probes' ``fields``; what they did not measure carries over."""
    link = link_file.link
    if "busbw_gbps" in fields:
        link = dataclasses.replace(link, busbw_gbps=fields["busbw_gbps"])
    host = link_file.host
    gloo = {k: fields[k] for k in _GLOO_FIELDS if k in fields}
    if gloo:
        host = GlooHost(**{**dataclasses.asdict(host or GlooHost()), **gloo})
    contention = link_file.contention
    if "compute_slowdown" in fields:
        factors = (fields["compute_slowdown"], fields["comm_slowdown"])
        contention = None if factors == (1.0, 1.0) else Contention(*factors, source="link")
    return LinkFile(link, contention, host, link_file.levels)


def _link_fields(link_file: LinkFile, m: dict[str, float], tensor_bytes: list[int],
                 world_size: int) -> dict:
    """Blocking α and busbw from the chain of the model's all-reduces against the whole
    gradient in one; none when either probe is missing or the model has one tensor."""
    fields: dict = {}
    if not ({"probe:flat", "probe:seq-blocking"} <= m.keys() and len(tensor_bytes) > 1):
        return fields
    link, gloo = link_file.link, link_file.host or GlooHost()
    # the chain follows 20 ms of compute: its first call paid the wake, charged apart
    chain_s = m["probe:seq-blocking"] - (gloo.idle_wake_s or 0.0)
    # the calibration's share of α that refills the bucket (its tail) holds for the probe
    share = refill_share(gloo)
    alpha_b, busbw_gbps = chain_and_whole(chain_s, m["probe:flat"],
                                          tensor_bytes, world_size, gloo.burst_bytes,
                                          link.busbw_gbps, share)
    if busbw_gbps is not None:
        fields["busbw_gbps"] = busbw_gbps
    if alpha_b >= 0 and link_file.host is not None:   # a waited-for call's α: Gloo's host
        fields["blocking_alpha_s"] = alpha_b
        if gloo.blocking_refill_s is not None:
            fields["blocking_refill_s"] = share * alpha_b
    return fields


def _contention_fields(contention: list[dict]) -> tuple[dict, dict]:
    """(the link's two slowdowns, what the report shows of them) from the per-rank medians."""
    c = combine_contention(contention)
    report = {k: c[k] for k in ("compute_slowdown_raw", "comm_slowdown_raw", "notes",
                                "per_rank")}
    return {"compute_slowdown": c["compute_slowdown"],
            "comm_slowdown": c["comm_slowdown"]}, report


def _copy_rates(m: dict[str, float], tensor_bytes: list[int], before: Host) -> dict | None:
    """The copy rates: probed now, else those measured earlier (if any)."""
    if _COPY_PROBES <= m.keys():
        return copy_rates(tensor_bytes, m["probe:copy"], m["probe:scale"])
    if before.costs("realrun").copy_gbps:
        c = before.costs("realrun")
        return {"copy_gbps": c.copy_gbps, "in_place_gbps": c.scale_gbps or c.copy_gbps}
    return None


def _probed_host(before: Host, copy: dict, m: dict[str, float] | None,
                 tensor_bytes: list[int], contention: tuple[float, float] | None = None
                 ) -> Host:
    """``before`` with the copy rates ``copy`` and, when ``m`` (the medians) holds the solo
    probes, the hook and launch costs they give; the rest carries over."""
    hook_s, launch_s = before.costs("realrun").hook_s, before.costs("realrun").launch_s
    torch_hook_s = before.costs("torch").hook_s
    if m is not None:
        solo = {f"{name}_s": m[f"probe:solo-{name}"] for name in ("wrapper", "bucket", "torch")
                if f"probe:solo-{name}" in m}
        f = hook_fields({"plain_s": m[COMPUTE_ONLY], **solo}, copy, tensor_bytes)
        hook_s, launch_s = f["hook_s"], f["launch_s"]
        if "torch_s" in solo:
            torch_hook_s = f["ddp_hook_s"]
    copies = {"copy_gbps": copy["copy_gbps"], "scale_gbps": copy["in_place_gbps"]}
    # FSDP2's costs and flat's calls (no probe of their own) carry over
    fsdp = {k: c for k, c in before.implementations.items() if k == TORCH_FSDP}
    late_s = before.costs("realrun").hook_after_backward_s
    return Host("probes", {"realrun": HostCosts(**copies, hook_s=hook_s, launch_s=launch_s,
                                                hook_after_backward_s=late_s),
                           "torch": HostCosts(**copies, hook_s=torch_hook_s), **fsdp},
                source="probes run alongside the strategies "
                       "(realrun/workflows/validate/probes.py)",
                contention=contention or before.contention,
                compute_after_comm=before.compute_after_comm)

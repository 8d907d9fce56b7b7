"""A CUDA trace on the GPU's clock: compute kernels are the compute lane, NCCL kernels the
communication lane.

On CUDA the host runs ahead of the GPU, so host times say little about when work ran. Every
kernel (``"cat": "kernel"``, also ``gpu_memcpy``/``gpu_memset``) names the runtime call that
launched it by ``args.correlation``; :class:`DeviceClock` turns a host instant into the GPU
instant by which everything launched before it has finished::

    tl = build_cuda_timeline(load_trace("rank0.json"))   # via simddp.traceimport.timeline

- an autograd node (on the autograd device thread) spans, on the GPU, from the end of the work
  launched before it to the end of its own; a gradient is ready when its ``AccumulateGrad``
  node's work (and the hook's copy into the bucket) has run;
- a collective is an NCCL kernel (``ncclDevKernel_AllReduce_...``, ``ncclKernel_AllReduce_...``);
  its size comes from the kernel's ``In msg nelems`` and ``dtype`` (recent torch copies them
  from ``record_param_comms``), else from the host op that launched it (``record_param_comms``,
  ``nccl:all_reduce`` or ``c10d::allreduce_`` with ``Input Dims``); it is issued when the
  kernel starts (the NCCL stream waits for the bucket's gradients);
- the profiler does not slow kernels down, so no per-event overhead is removed;
- **one GPU** (world size 1): NCCL launches no kernel for a one-rank all-reduce, but the host
  still records each call (``record_param_comms`` with ``Collective name`` and ``In``/``Out
  msg nelems``, inside ``c10d::allreduce_``). Those records become the collectives, issued
  and ended when the GPU has run all work launched before the call (without those records,
  the ``c10d::allreduce_`` ops): the gradient sizes and ready times come from the trace, the
  network does not (``Timeline.local_comms``).

Tested on minimal events written by hand in the Kineto format (tests/simddp/
test_trace_import.py); no GPU trace was recorded for this project.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from simddp.errors import InputError
from simddp.traceimport.events import (
    DTYPE_BYTES,
    GPU_CATEGORIES,
    Event,
    RankTrace,
    nbytes_of,
    numel_of,
    shape_of,
)
from simddp.traceimport.lanes import (
    ACCUMULATE,
    HOST_CATEGORIES,
    OPTIMIZER,
    STEP,
    Comm,
    Node,
    Timeline,
    Window,
    comm_kind,
    implementation,
    merge,
    node_events,
    node_name,
)

LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver", "runtime", "driver")
_NCCL_KINDS = (("allreduce", "allreduce"), ("broadcast", "broadcast"),
               ("allgather", "allgather"), ("reducescatter", "reducescatter"),
               ("sendrecv", "sendrecv"))


def nccl_kind(kernel: Event) -> str | None:
    """'allreduce' for ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``; None if not NCCL's."""
    if not kernel.name.lower().startswith("nccl"):
        return None
    named = str(kernel.args.get("Collective name", "")).replace("_", "").lower()
    text = named or kernel.name.replace("_", "").lower()
    return next((kind for key, kind in _NCCL_KINDS if key in text), "other")


@dataclass
class DeviceClock:
    """Host instant -> GPU instant, through the kernels' launch correlations."""

    launch_s: list[float]     # host time of each compute kernel's launch, sorted
    done_s: list[float]       # running max of those kernels' ends
    kernel_start_s: list[float]

    @classmethod
    def of(cls, kernels: list[Event], launched: dict) -> "DeviceClock":
        pairs = sorted((launched[k.args["correlation"]], k) for k in kernels
                       if k.args.get("correlation") in launched)
        if not pairs:
            raise InputError("no GPU kernel can be tied to the host call that launched it "
                             "(args.correlation); record with ProfilerActivity.CUDA")
        done, running = [], float("-inf")
        for _, k in pairs:
            running = max(running, k.end_s)
            done.append(running)
        return cls([t for t, _ in pairs], done, [k.start_s for _, k in pairs])

    def done_by(self, host_s: float) -> float:
        """When the GPU has finished everything launched up to ``host_s``."""
        i = bisect.bisect_right(self.launch_s, host_s) - 1
        return self.done_s[i] if i >= 0 else self.kernel_start_s[0]

    def first_after(self, host_s: float) -> float:
        """When the first kernel launched at or after ``host_s`` started on the GPU."""
        i = bisect.bisect_left(self.launch_s, host_s)
        return self.kernel_start_s[i] if i < len(self.launch_s) else self.done_s[-1]


def build_cuda_timeline(trace: RankTrace) -> Timeline:
    device = [e for e in trace.events if e.cat in GPU_CATEGORIES]
    nccl = [k for k in device if nccl_kind(k)]
    compute = [k for k in device if not nccl_kind(k)]
    launches = {e.args["correlation"]: e.start_s for e in trace.events
                if e.cat in LAUNCH_CATEGORIES and "correlation" in e.args}
    try:
        clock = DeviceClock.of(compute, launches)
    except InputError as e:
        raise InputError(f"{trace.path}: {e}") from None
    host = [e for e in trace.events if e.cat in HOST_CATEGORIES]
    grads = [e for e in host if e.name == ACCUMULATE]
    grad_starts = [e.start_s for e in grads]
    nodes = []
    for n in node_events(trace):
        i = bisect.bisect_left(grad_starts, n.start_s)
        grad = grads[i] if i < len(grads) and n.contains(grads[i]) else None
        nodes.append(Node(node_name(n), clock.done_by(n.start_s), clock.done_by(n.end_s),
                          grad_bytes=None if grad is None else nbytes_of(grad),
                          grad_shape=None if grad is None else shape_of(grad)))
    comms = _nccl_comms(trace, nccl, host, launches)
    local = trace.world_size == 1 and not any(c.kind == "allreduce" for c in comms)
    if local:
        comms = _host_comms(host, clock)
    return Timeline(
        trace=trace, device="cuda", implementation=implementation(trace),
        nodes=tuple(nodes), comms=tuple(comms), local_comms=local,
        steps=_on_device(host, STEP, clock), optimizer=_on_device(host, OPTIMIZER, clock),
        event_starts=(), overhead_s=0.0, start_s=min(k.start_s for k in device),
        end_s=max(k.end_s for k in device),
        busy=merge((k.start_s, k.end_s) for k in compute))


def _on_device(host: list[Event], prefix: str, clock: DeviceClock) -> tuple[Window, ...]:
    return tuple(Window(e.name, clock.first_after(e.start_s), clock.done_by(e.end_s))
                 for e in host if e.name.startswith(prefix))


def _nccl_comms(trace: RankTrace, kernels: list[Event], host: list[Event],
                launches: dict) -> list[Comm]:
    """NCCL kernels as collectives; sizes from the kernel, else from the host op around the
    call that launched it."""
    sized = [e for e in host if nbytes_of(e) is not None and (
        e.name == "record_param_comms" or (comm_kind(e.name) and not e.name.startswith("c10d::")))]
    comms = []
    for k in kernels:
        nbytes = nbytes_of(k)
        if nbytes is None and k.args.get("correlation") in launches:
            t = launches[k.args["correlation"]]
            around = [e for e in sized if e.start_s <= t <= e.end_s]
            nbytes = nbytes_of(around[-1]) if around else None
        comms.append(Comm(nccl_kind(k), nbytes, k.start_s, k.start_s, k.end_s))
    return comms


def _host_comms(host: list[Event], clock: DeviceClock) -> list[Comm]:
    """One rank's collectives from the host's ``record_param_comms`` records (no kernel ran):
    each issued, started and ended when the GPU finished the work launched before it."""
    comms, outer_end_s = [], float("-inf")
    for e in host:
        named = str(e.args.get("Collective name", "")).replace("_", "").lower()
        if e.name != "record_param_comms" or not named or e.start_s < outer_end_s:
            continue     # a record inside another is the same call recorded twice
        outer_end_s = e.end_s
        kind = next((k for key, k in _NCCL_KINDS if key in named), "other")
        nbytes = nbytes_of(e)
        if nbytes is None and "Out msg nelems" in e.args:   # some builds fill only Out
            nbytes = nbytes_of(replace(e, args={**e.args,
                                                "In msg nelems": e.args["Out msg nelems"]}))
        at_s = clock.done_by(e.start_s)
        comms.append(Comm(kind, nbytes, at_s, at_s, at_s))
    return comms or _launch_comms(host, clock)


def _launch_comms(host: list[Event], clock: DeviceClock) -> list[Comm]:
    """Without ``record_param_comms`` (torch 2.13's Gloo records none; a build may do the
    same on NCCL): the ``c10d::`` launch ops, their elements from ``Input Dims`` and their
    element size from the gradients' recorded type (a TensorList records none)."""
    types = [str(e.args["Input type"][0]) for e in host if e.name == ACCUMULATE
             and isinstance(e.args.get("Input type"), list) and e.args["Input type"]]
    size = DTYPE_BYTES.get(max(set(types), key=types.count)) if types else None
    comms = []
    for e in host:
        kind = comm_kind(e.name) if e.name.startswith("c10d::") else None
        if kind:
            numel, at_s = numel_of(e), clock.done_by(e.start_s)
            comms.append(Comm(kind, None if not (numel and size) else numel * size,
                              at_s, at_s, at_s))
    return comms

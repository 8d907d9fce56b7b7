"""A synthetic 8-rank CUDA trace of a hybrid job, the shape of issue 61's: a dense part under
torch DDP (three gradient all-reduces per step, 1–173 MiB) beside model-parallel embeddings
(all_to_all in the forward and in the backward, on their own process group and stream).

    traces = hybrid_job()                  # one Chrome trace per rank (Kineto format)
    paths = write(tmp_path, traces)        # tests.simddp.hand_traces.write

What made the issue's import fit α 1945 µs and busbw 7,540 GB/s: each all-reduce kernel took
about the same 1.9–2.0 ms whatever its size (the small ones held up beside the all_to_all),
so a line through them is flat: a large α and a bandwidth beyond any link. The kernels here
take ``AR_ALPHA_US + bus·n/AR_BUSBW`` with that α and busbw, plus a little jitter per step.

Per rank and step, on the GPU's clock: the embedding lookup, its all_to_all (stream 21,
:data:`A2A_US`), the dense forward (waiting for it), the backward (autograd thread): the head,
then L2, L1, L0, each making its bias and weight ready and torch DDP's bucket launching its
all-reduce (stream 20) from the last one's hook; the embeddings' backward all_to_all; the
optimizer. Layer sizes (forward order) make torch's buckets 1 MiB (its first bucket), 24 MiB
and 173 MiB at a cap in (12, 24] MB.
"""
from __future__ import annotations

RANKS, STEPS = 8, 4
AR_ALPHA_US, AR_BUSBW_GBPS = 1945.0, 7540.0
A2A_US = 2000.0
EMB_US, OPT_US = 300.0, 500.0
# (name, weight shape, forward µs, backward µs), forward order
DENSE = (("L0", (41216, 1024), 1500.0, 3000.0), ("L1", (3072, 1024), 200.0, 400.0),
         ("L2", (6144, 1024), 400.0, 800.0), ("head", (256, 1024), 50.0, 100.0))
MAIN, AUTOGRAD, COMPUTE, NCCL, A2A = 1, 2, 7, 20, 21
NODE = "autograd::engine::evaluate_function: "


class _Rank:
    """One rank's trace being written: host clock, streams, correlation ids."""

    def __init__(self, rank: int) -> None:
        self.rank, self.events, self.free, self.corr = rank, [], {}, 0
        self.pending: list = []      # all-reduces launched, their kernels not yet placed
        self.bwd_end_host = 0.0

    def x(self, name, ts, dur, tid=MAIN, cat="cpu_op", args=None, pid=1) -> dict:
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
             "args": args or {}}
        self.events.append(e)
        return e

    def kernel(self, name, at, dur, stream, tid, after=0.0, args=None) -> dict:
        """A kernel launched on the host at ``at``, starting when its stream is free and what
        it waits for (``after``) is done."""
        self.corr += 1
        self.x("cudaLaunchKernel", at, 3.0, tid, "cuda_runtime", {"correlation": self.corr})
        start = max(at + 5.0, self.free.get(stream, 0.0), after)
        self.free[stream] = start + dur
        return self.x(name, start, dur, stream, "kernel",
                      {"correlation": self.corr, "stream": stream, "device": 0, **(args or {})},
                      pid=0)


def _bucket_us(nbytes: int, jitter: float) -> float:
    bus = 2 * (RANKS - 1) / RANKS
    return AR_ALPHA_US + bus * nbytes / (AR_BUSBW_GBPS * 1e3) + jitter


def hybrid_job(all_reduce_kernels: bool = True) -> list[dict]:
    """One trace per rank (module text); ``all_reduce_kernels=False``: the all-reduces'
    kernels are missing from the GPU's activity, their host ops kept (a refusal's case)."""
    ranks = [_Rank(r) for r in range(RANKS)]
    t0 = 1000.0
    for step in range(STEPS):
        step_start = t0 + step * 40000.0
        ar_ready = {}      # bucket -> (latest kernel-ready time over ranks)
        for rk in ranks:
            skew = 7.0 * rk.rank
            h = step_start + skew
            rk.x(f"ProfilerStep#{step + 1}", h, 0, cat="user_annotation")
            rk.x("DistributedDataParallel.forward", h + 10, 50, cat="user_annotation")
            lookup = rk.kernel("embedding_lookup_kernel", h + 20, EMB_US, COMPUTE, MAIN)
            _a2a(rk, h + 40, lookup["ts"] + lookup["dur"], MAIN)
            waited = rk.free[A2A]
            for i, (name, shape, fwd_us, _) in enumerate(DENSE):
                rk.x("aten::linear", h + 60 + 10 * i, 8)
                rk.kernel(f"gemm_fwd_{name}", h + 62 + 10 * i, fwd_us, COMPUTE, MAIN,
                          after=waited)
        # backward: the autograd thread, reverse order, one bucket per the layers below
        buckets = [("head",), ("L2",), ("L1", "L0")]
        last_of = {b[-1]: k for k, b in enumerate(buckets)}
        for rk in ranks:
            h = rk.free[COMPUTE] - 200.0 + 7.0 * rk.rank
            for name, shape, _, bwd_us in reversed(DENSE):
                rk.x(NODE + "AddmmBackward0", h, 20, AUTOGRAD)
                rk.kernel(f"gemm_bwd_{name}", h + 5, bwd_us, COMPUTE, AUTOGRAD)
                h += 25
                for which, dims in (("bias", [shape[1]]), ("weight", list(shape))):
                    rk.x(NODE + "torch::autograd::AccumulateGrad", h, 15, AUTOGRAD)
                    rk.x("torch::autograd::AccumulateGrad", h + 1, 13, AUTOGRAD,
                         args={"Input Dims": [dims], "Input type": ["float"]})
                    rk.x("torch::distributed::reducer::mul_out", h + 3, 4, AUTOGRAD)
                    rk.kernel(f"copy_{which}_{name}", h + 4, 20.0, COMPUTE, AUTOGRAD)
                    h += 20
                if name in last_of:
                    k = last_of[name]
                    nbytes = sum(4 * (s[0] * s[1] + s[1]) for n, s, _, _ in DENSE
                                 if n in buckets[k])
                    at = h - 8
                    rk.x("c10d::allreduce_", at, 6, AUTOGRAD,
                         args={"Input Dims": [[[nbytes // 4]], []],
                               "Input type": ["TensorList", "Scalar"]})
                    meta = {"Collective name": "allreduce", "In msg nelems": nbytes // 4,
                            "Out msg nelems": nbytes // 4, "Group size": RANKS, "dtype": "Float",
                            "Process Group Name": "0"}
                    rk.x("record_param_comms", at + 1, 4, AUTOGRAD, args=meta)
                    rk.x("nccl:all_reduce", at + 2, 2, AUTOGRAD, cat="user_annotation")
                    # the stream waits for the bucket's copies; the kernel starts then
                    ready = rk.free[COMPUTE]
                    ar_ready[k] = max(ar_ready.get(k, 0.0), ready)
                    rk.pending.append((k, at + 2, nbytes, meta))
            rk.x(NODE + "All2AllPooledBackward", h, 30, AUTOGRAD)
            rk.bwd_end_host = h + 40
        # all-reduce kernels: each starts on every rank once its stream reaches it, and ends
        # together, AR_ALPHA_US + bytes after the last rank joined
        lane_end = {}
        for k in range(len(buckets)):
            for rk in ranks:
                _, at, nbytes, meta = next(p for p in rk.pending if p[0] == k)
                start = max(ar_ready[k], lane_end.get(k - 1, 0.0)) - 3.0 * (RANKS - rk.rank)
                end = max(ar_ready[k], lane_end.get(k - 1, 0.0)) \
                    + _bucket_us(nbytes, 9.0 * ((step * 3 + k) % 5))
                lane_end[k] = end
                if all_reduce_kernels:
                    rk.corr += 1
                    rk.x("cudaLaunchKernel", at, 3.0, AUTOGRAD, "cuda_runtime",
                         {"correlation": rk.corr})
                    rk.x("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgs)", start,
                         end - start, NCCL, "kernel",
                         {"correlation": rk.corr, "stream": NCCL, **meta}, pid=0)
                rk.free[NCCL] = end
        for rk in ranks:
            rk.pending = []
            _a2a(rk, rk.bwd_end_host - 30, rk.free[COMPUTE], AUTOGRAD)
            h = max(rk.bwd_end_host + 50, rk.free[NCCL] - 100)
            rk.x("Optimizer.step#SGD.step", h, 80, cat="user_annotation")
            rk.kernel("multi_tensor_apply_kernel", h + 10, OPT_US, COMPUTE, MAIN,
                      after=max(rk.free[NCCL], rk.free[A2A]))
            step_end = rk.free[COMPUTE] + 20
            for e in rk.events:
                if e["name"] == f"ProfilerStep#{step + 1}":
                    e["dur"] = step_end - e["ts"]
    return [{"schemaVersion": 1, "traceEvents": rk.events,
             "distributedInfo": {"backend": "nccl", "rank": rk.rank, "world_size": RANKS},
             "host_name": f"node{rk.rank // 8}"} for rk in ranks]


def _a2a(rk: _Rank, at: float, after: float, tid: int) -> None:
    """The embeddings' all_to_all: its host ops and a SendRecv kernel on its own stream."""
    meta = {"Collective name": "all_to_all", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20,
            "Group size": RANKS, "dtype": "Float", "Process Group Name": "1"}
    rk.x("c10d::alltoall_base_", at, 10, tid)
    rk.x("record_param_comms", at + 1, 8, tid, args=meta)
    rk.x("nccl:all_to_all", at + 2, 6, tid, cat="user_annotation")
    rk.kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", at + 3, A2A_US, A2A,
              tid, after=after)

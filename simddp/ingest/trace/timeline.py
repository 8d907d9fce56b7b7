"""One rank's trace read into lanes, CPU or CUDA alike::

    tl = build_timeline(load_trace("rank0.json"))
    len(tl.nodes), len(tl.comms), tl.device          # e.g. (372, 60, 'cpu')

A CPU trace's compute lane is the thread that ran the backward (simddp.ingest.trace.cpu); a
CUDA trace's is the GPU, with NCCL kernels as its communication lane
(simddp.ingest.trace.cuda). The result is a :class:`simddp.ingest.trace.rank_timeline.Timeline`.
"""
from __future__ import annotations

from simddp.ingest.trace.cpu import build_cpu_timeline
from simddp.ingest.trace.cuda import build_cuda_timeline
from simddp.ingest.trace.events import RankTrace
from simddp.ingest.trace.rank_timeline import Timeline


def build_timeline(trace: RankTrace) -> Timeline:
    """The lanes of one rank; InputError naming the trace if it lacks what the import needs."""
    if trace.device == "cuda":
        return build_cuda_timeline(trace)
    return build_cpu_timeline(trace)

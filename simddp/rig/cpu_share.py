"""Whether Gloo's threads have cores of their own while the ranks compute.

Each Gloo rank runs its training thread(s) and three of Gloo's. Where the training threads
fill the CPUs, a collective launched during the backward waits scheduler ticks for a core;
the engine does not model the scheduler, so it predicts overlapped collectives too fast
there (docs/FINDINGS.md#cores-and-the-scheduler)::

    >>> note = starved_note("gloo", ranks_on_host=2, threads_per_rank=1, cpus=2)
    >>> note.split(":")[0]
    '2 ranks x (1 training thread + 3 of Gloo) on 2 CPUs'
    >>> starved_note("gloo", 2, 1, 16), starved_note("nccl", 8, 1, 8)
    ('', '')
"""
from __future__ import annotations

# ProcessGroupGloo's worker threads (its default, 2) and the TCP transport's loop thread.
GLOO_THREADS_PER_RANK = 3


def starved_note(backend: str, ranks_on_host: int, threads_per_rank: int, cpus: int) -> str:
    """A one-line caution when Gloo's threads cannot all run beside the ranks' training
    threads (``ranks_on_host`` × (``threads_per_rank`` + 3) > ``cpus``), else ''. NCCL's
    collectives run on the GPU: no caution."""
    if backend != "gloo" or min(ranks_on_host, threads_per_rank, cpus) < 1:
        return ""
    if ranks_on_host * (threads_per_rank + GLOO_THREADS_PER_RANK) <= cpus:
        return ""
    return (f"{ranks_on_host} ranks x ({threads_per_rank} training thread"
            f"{'s' if threads_per_rank > 1 else ''} + {GLOO_THREADS_PER_RANK} of Gloo) on "
            f"{cpus} CPUs: collectives that overlap compute wait for a core, which simddp "
            "does not model; rows with many small overlapped collectives run slower than "
            "predicted (a transformer's per-parameter overlap: -53 % with 1 CPU per rank, "
            "-41 % with 2, +9 % with 8: docs/FINDINGS.md#cores-and-the-scheduler)")


def section_note(section) -> str:
    """:func:`starved_note` for what a run recorded of itself: a ``realrun bench`` file's
    ``bench`` section or a ``realrun profile`` file's ``measured`` one, each with its
    ``backend``, ``threads``, ``cpus`` and ``ranks_on_host`` (older files have no ``cpus``: '')::

        >>> section_note({"backend": "gloo", "threads": 1, "cpus": 4, "ranks_on_host": 2})[:28]
        '2 ranks x (1 training thread'
        >>> section_note({"backend": "gloo", "threads": 1}), section_note(None)
        ('', '')
    """
    if not isinstance(section, dict):
        return ""
    values = [section.get(k) for k in ("ranks_on_host", "threads", "cpus")]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return ""
    return starved_note(str(section.get("backend", "")), *values)

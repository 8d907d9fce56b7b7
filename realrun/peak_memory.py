"""Peak memory per profiling phase, on one rank and over the ranks.

``realrun profile`` marks each phase it measures (layers, copies, hooks, plain steps,
contention, FSDP2) with :class:`PeakMemory`; :func:`memory_over_ranks` takes the max over
ranks of each phase (docs/FINDINGS.md#memory-and-the-allocator).
"""
from __future__ import annotations

import gc

import torch

from realrun.launch.allocator import release_free_memory


class PeakMemory:
    """This rank's peak memory per phase, in bytes over what it used when profiling began:
    on CUDA the caching allocator's ``max_memory_allocated``; on CPU the process's resident
    high-water mark (VmHWM, reset between phases by writing 5 to /proc/self/clear_refs).
    Garbage is collected after each reading (on CPU the heap's free blocks handed back too),
    so a phase's reading is its own peak, not the leftovers of the one before."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self.base = self._now()
        self.phases: dict[str, int] = {}
        self._reset()

    def mark(self, phase: str) -> None:
        """Record the peak since the last mark as ``phase``'s; collect garbage; reset."""
        self.phases[phase] = max(0, self._peak() - self.base)
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()
        else:  # the heap keeps freed blocks (realrun/launch/allocator.py): hand them back
            release_free_memory()
        self._reset()

    def summary(self) -> dict:
        return {"peak_bytes": max(self.phases.values(), default=0), "phases": self.phases,
                "how": "max_memory_allocated" if self.cuda else "VmHWM over VmRSS at start"}

    def _now(self) -> int:
        return (torch.cuda.memory_allocated(self.device) if self.cuda
                else _status_kib("VmRSS") * 1024)

    def _peak(self) -> int:
        return (torch.cuda.max_memory_allocated(self.device) if self.cuda
                else _status_kib("VmHWM") * 1024)

    def _reset(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        except OSError:
            pass  # not Linux: the high-water mark then covers every phase so far


def _status_kib(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory_over_ranks(memories: list[dict]) -> dict:
    """Each phase's peak, the max over ranks; ``torch_ddp_step_bytes``: the phase of plain
    and torch DDP steps (the same weights, gradients and bucket as a torch DDP job's step).

    >>> memory_over_ranks([{"phases": {"a": 5, "hooks:torch": 4}, "how": "x"},
    ...                    {"phases": {"a": 3, "hooks:torch": 6}, "how": "x"}])["peak_bytes"]
    6
    """
    phases = {k: max(m["phases"][k] for m in memories) for k in memories[0]["phases"]}
    return {"peak_bytes": max(phases.values()), "phases": phases,
            "peak_phase": max(phases, key=phases.get),
            "torch_ddp_step_bytes": phases.get("hooks:torch"), "how": memories[0]["how"]}

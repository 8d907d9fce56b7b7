"""Keep glibc malloc from handing a step's tensors back to the kernel between steps.

A CPU rank frees its gradients and activations every step (``zero_grad(set_to_none=True)``)
and allocates them again in the next. With glibc's defaults the mmap and trim thresholds
adapt to the history of frees, so whether those megabytes stay in the heap or are unmapped
and faulted back in, page by page, zeroed by the kernel, changes from process to process and
from phase to phase. Measured here (2 ranks, 1 thread each, plain steps after a barrier,
2026-11-25, docs/results/2026-11-25-allocator.md, bench/step_faults.py): in 4 of 5 fresh
worlds of mlp-8x1024 one rank re-faulted 4-28 MB a step (1024-7136 minor faults, up to
20 ms of system time on a ~100 ms step), the other rank none; and
``realrun profile``'s first chunk of plain steps, right after its per-layer phase, ran
+6 … +37 ms slower than the median of the other three in all 9 default profiles of that
model, which scaled its compute up. With both thresholds set (which also turns their
adaptation off) every world read 0 faults a step and 0 ms of system time (and ran 12 %
faster: 90.5 against 103.2 ms, the mean of 5 world medians each), and the first chunk no
longer stood out (−9 … +2 ms in 3 profiles).

So every Gloo rank realrun starts (``make_context``) sets them: blocks up to 32 MiB (glibc's
largest mmap threshold on 64-bit) come from the heap, and the heap is never trimmed. Left
alone where the user chose an allocator or glibc settings (``LD_PRELOAD``, ``MALLOC_*``,
``GLIBC_TUNABLES``), asked for glibc as it comes (``REALRUN_ALLOCATOR=default``), and where
the C library is not glibc. Between measured phases
:func:`release_free_memory` returns what the heap holds free, so a phase's resident peak is
its own (realrun.peak_memory.PeakMemory).
"""
from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3   # <malloc.h>
MMAP_THRESHOLD_BYTES = 32 * 2**20               # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD_BYTES = 2**31 - 1                # mallopt takes an int: never, in practice
OPT_OUT = "REALRUN_ALLOCATOR"                   # "default": glibc as it comes (bench/step_faults.py)


def user_choice(environ: dict[str, str]) -> str | None:
    """Why the allocator is the user's to set, or None.

    >>> user_choice({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"})
    'LD_PRELOAD is set'
    >>> user_choice({OPT_OUT: "default"})
    'REALRUN_ALLOCATOR=default'
    >>> user_choice({"MALLOC_ARENA_MAX": "2"}), user_choice({"PATH": "/bin"})
    ('MALLOC_ARENA_MAX is set', None)
    """
    if environ.get(OPT_OUT) == "default":
        return f"{OPT_OUT}=default"
    if environ.get("LD_PRELOAD"):
        return "LD_PRELOAD is set"
    for name in sorted(environ):
        if name.startswith("MALLOC_"):   # glibc's MALLOC_ARENA_MAX, MALLOC_TRIM_THRESHOLD_, ...
            return f"{name} is set"
    if "malloc" in environ.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES sets malloc"
    return None


def _glibc():
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL(None)


def pin_thresholds(environ: dict[str, str] | None = None) -> str:
    """Set glibc's mmap and trim thresholds in this process; what was done, in words."""
    why = user_choice(os.environ if environ is None else environ)
    if why:
        return f"left as set by the user ({why})"
    libc = _glibc()
    if libc is None:
        return "left: not glibc"
    ok = (libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
          and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1)
    return ("glibc: mmap threshold 32 MiB, no trim" if ok
            else "left: glibc refused the thresholds")


def release_free_memory() -> None:
    """Hand the heap's free memory back to the kernel (``malloc_trim(0)``); glibc only."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)

"""Keep glibc malloc from handing a step's tensors back to the kernel between steps.

A CPU rank frees its gradients and activations every step and allocates them again; with
glibc's adaptive mmap and trim thresholds some ranks re-fault them from the kernel every step
and some do not (docs/FINDINGS.md#memory-and-the-allocator). So every Gloo rank realrun starts
pins both: blocks up to 32 MiB from the heap, never trimmed. Left alone where the user chose
(``LD_PRELOAD``, ``MALLOC_*``, malloc ``GLIBC_TUNABLES`` other than huge pages,
``REALRUN_ALLOCATOR=default``) or the C library is not glibc. Which pages the heap is on is left
to the user and reported: huge pages slowed traced steps (docs/FINDINGS.md#models-a-rank-holds).
"""
from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3   # <malloc.h>
MMAP_THRESHOLD_BYTES = 32 * 2**20               # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD_BYTES = 2**31 - 1                # mallopt takes an int: never, in practice
OPT_OUT = "REALRUN_ALLOCATOR"                   # "default": glibc as it comes
HUGE_PAGES = "glibc.malloc.hugetlb=1"           # glibc >= 2.35: madvise the heap for THP
THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"
SMALL_PAGES = "4 KiB pages"   # huge_pages' words for them, which held_models_note looks for


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
    # huge pages alone leave the thresholds to realrun: pages do not change what is unmapped
    tunables = [t for t in environ.get("GLIBC_TUNABLES", "").split(":") if "malloc" in t]
    if any(t.partition("=")[0] != HUGE_PAGES.partition("=")[0] for t in tunables):
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
    if not ok:
        return "left: glibc refused the thresholds"
    return "glibc: mmap threshold 32 MiB, no trim, " + huge_pages(
        os.environ if environ is None else environ)


def huge_pages(environ) -> str:
    """Whether this process's heap is on transparent huge pages, in words: with THP
    ``always`` it is, with ``madvise`` only if glibc was asked (:data:`HUGE_PAGES`)."""
    try:
        with open(THP_MODE) as f:
            mode = f.read()
    except OSError:
        return f"{SMALL_PAGES} (this kernel has no transparent huge pages)"
    if "[always]" in mode:
        return f"heap on huge pages ({THP_MODE}: always)"
    if "[never]" in mode:
        return f"{SMALL_PAGES} ({THP_MODE}: never)"
    return "heap on huge pages" if HUGE_PAGES in environ.get("GLIBC_TUNABLES", "") \
        else SMALL_PAGES


def held_models_note(backend: str, models: int | None, allocator: str | None) -> str:
    """A one-line caution for ``realrun bench``'s table where each Gloo rank held more than
    one model on 4 KiB pages, else ''::

        >>> held_models_note("gloo", 15, "glibc: mmap threshold 32 MiB, no trim, 4 KiB pages")[:40]
        'each rank held 15 models (its configurat'
        >>> held_models_note("gloo", 15, "... heap on huge pages"), held_models_note("nccl", 15, "")
        ('', '')
    """
    if backend != "gloo" or not isinstance(models, int) or models < 2:
        return ""
    if not isinstance(allocator, str) or SMALL_PAGES not in allocator:
        return ""
    return (f"each rank held {models} models (its configurations and the twin) on 4 KiB "
            "pages: their compute reads slower than a one-model job's (on a 2-vCPU VM, 14 held "
            "against 1: +13 % at the median; --hold one, the default, builds one per turn; "
            "docs/REALRUN.md, 'The models a bench rank holds')")


def release_free_memory() -> None:
    """Hand the heap's free memory back to the kernel (``malloc_trim(0)``; glibc only), so the
    next measured phase's resident peak is its own."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)

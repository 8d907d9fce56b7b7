"""realrun/launch/allocator.py: a CPU rank's freed blocks stay in the heap between steps.

The pattern below is what a training step does to glibc with its default, adaptive
thresholds: blocks just under the mmap threshold, freed together, leave more at the top of
the heap than the trim threshold, so each repeat is unmapped and faulted back in."""
from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from realrun.launch.allocator import (HUGE_PAGES, SMALL_PAGES, huge_pages, pin_thresholds,
                                     user_choice)

REPO = Path(__file__).resolve().parents[2]
PATTERN = r"""
import ctypes, resource, sys
from realrun.launch.allocator import pin_thresholds
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "pin":
    pin_thresholds({})

def step():  # three 900 KiB blocks written and freed, like a step's gradients
    blocks = [libc.malloc(900 * 1024) for _ in range(3)]
    for b in blocks:
        ctypes.memset(b, 1, 900 * 1024)
    for b in blocks:
        libc.free(b)

libc.free(libc.malloc(1 << 20))   # glibc raises its mmap threshold to 1 MiB
for _ in range(5):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PATTERN, mode], cwd=REPO, check=True,
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    return int(out.stdout.split()[-1])


@glibc_only
def test_pinned_thresholds_keep_freed_blocks_resident():
    default, pinned = _faults("default"), _faults("pin")
    # 10 repeats x 2.7 MB: ~6600 faults of 4 KiB with glibc's defaults (measured 6430)
    assert default > 3000, f"glibc no longer trims in this pattern ({default} faults)"
    assert pinned < 100


def test_the_users_allocator_is_left_alone():
    preload = {"LD_PRELOAD": "libtcmalloc.so"}
    said = pin_thresholds(preload)
    assert said.split()[0] == "left" and user_choice(preload) in said   # and why
    assert user_choice({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
    assert user_choice({"MALLOC_TRIM_THRESHOLD_": "0"}) == "MALLOC_TRIM_THRESHOLD_ is set"


def test_asking_for_huge_pages_alone_is_not_choosing_the_allocator():
    # realrun still pins its thresholds beside it; any other malloc tunable is the user's
    assert user_choice({"GLIBC_TUNABLES": HUGE_PAGES}) is None
    assert user_choice({"GLIBC_TUNABLES": f"glibc.cpu.x86_ibt=off:{HUGE_PAGES}"}) is None
    assert user_choice({"GLIBC_TUNABLES": f"{HUGE_PAGES}:glibc.malloc.arena_max=2"})


@glibc_only
def test_a_rank_reports_its_pages():
    asked = {"GLIBC_TUNABLES": HUGE_PAGES}
    pinned = pin_thresholds(asked)
    assert pinned.split()[0] == "glibc:"            # thresholds set, then the heap's pages
    assert pinned.endswith(huge_pages(asked))
    # without it, 4 KiB pages where the kernel gives huge ones only on request (this VM)
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.is_file() and "[madvise]" in thp.read_text():
        assert SMALL_PAGES not in pinned      # asked for: huge pages
        assert pin_thresholds({}).endswith(SMALL_PAGES)

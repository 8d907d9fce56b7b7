"""Device throughputs for FLOP-based layer times: documented peaks times an efficiency.

Peaks are vendor datasheet numbers (dense, no sparsity) at the precision training computes in
— bf16/fp16 tensor cores on GPUs, fp32 on the CPU. ``efficiency`` is the fraction of peak a
real step achieves (model FLOPs utilisation); 0.4 is typical of well-tuned GPU training::

    >>> get_device("a100").seconds(flops=312e12 * 0.4, nbytes=0)
    1.0
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simddp.errors import InputError


@dataclass(frozen=True)
class Device:
    name: str
    peak_tflops: float
    mem_gbps: float        # memory bandwidth, GB/s (1e9 bytes/s)
    efficiency: float
    act_bytes: int         # bytes per activation element (bf16 = 2 on GPUs, fp32 = 4 on CPU)
    source: str

    def seconds(self, flops: float, nbytes: float) -> float:
        """Roofline time: bound by compute or by memory traffic, whichever is slower."""
        return max(flops / (self.peak_tflops * 1e12 * self.efficiency),
                   nbytes / (self.mem_gbps * 1e9 * self.efficiency))

    def with_efficiency(self, efficiency: float) -> "Device":
        if not (isinstance(efficiency, (int, float)) and math.isfinite(efficiency)
                and 0 < efficiency <= 1):
            raise InputError(f"--efficiency must be in (0, 1], got {efficiency!r}")
        return replace(self, efficiency=efficiency)


DEVICES = {d.name: d for d in (
    Device("cpu", 0.096, 20.0, 0.5, 4,
           "one x86 core with two AVX2 FMA units: 2 units × 8 fp32 lanes × 2 flops × 3 GHz "
           "= 96 GFLOP/s; ~20 GB/s of DRAM bandwidth per core"),
    Device("t4", 65.0, 320.0, 0.4, 2, "NVIDIA T4 datasheet: 65 TFLOPS fp16 tensor, 320 GB/s"),
    Device("v100", 125.0, 900.0, 0.4, 2,
           "NVIDIA V100 SXM2 datasheet: 125 TFLOPS fp16 tensor, 900 GB/s HBM2"),
    Device("a100", 312.0, 2039.0, 0.4, 2,
           "NVIDIA A100 80GB SXM datasheet: 312 TFLOPS bf16 dense, 2039 GB/s HBM2e"),
    Device("h100", 989.0, 3350.0, 0.4, 2,
           "NVIDIA H100 SXM datasheet: 989 TFLOPS bf16 dense, 3350 GB/s HBM3"),
    Device("h200", 989.0, 4800.0, 0.4, 2,
           "NVIDIA H200 SXM: the H100's GH100 compute (1979 TFLOPS bf16 with sparsity = 989 "
           "dense), 4800 GB/s HBM3e (141 GB), as spec pages quoting NVIDIA give it; the "
           "datasheet itself was not at hand"),
    Device("b200", 2250.0, 8000.0, 0.4, 2,
           "NVIDIA HGX B200 (1000 W): 2250 TFLOPS bf16 dense, 8000 GB/s HBM3e, from NVIDIA's "
           "figures as glennklockwood.com/garden/processors/B200 tabulates them; the "
           "datasheet itself was not at hand"),
)}


def get_device(name: str) -> Device:
    try:
        return DEVICES[name]
    except KeyError:
        raise InputError(f"unknown device {name!r}; choose from {', '.join(DEVICES)}") from None

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


# What --compute-dtype takes, and the bytes of one activation element in it.
COMPUTE_DTYPES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class Device:
    name: str
    peak_tflops: float
    mem_gbps: float        # memory bandwidth, GB/s (1e9 bytes/s)
    efficiency: float
    act_bytes: int         # bytes per activation element (bf16 = 2 on GPUs, fp32 = 4 on CPU)
    source: str
    fp32_tflops: float | None = None   # datasheet fp32 peak (no tensor cores), for dtype fp32

    def seconds(self, flops: float, nbytes: float) -> float:
        """Roofline time: bound by compute or by memory traffic, whichever is slower."""
        return max(flops / (self.peak_tflops * 1e12 * self.efficiency),
                   nbytes / (self.mem_gbps * 1e9 * self.efficiency))

    def for_dtype(self, dtype: str | None) -> "Device":
        """The device computing in ``dtype``: fp32 at its fp32 peak with 4-byte activations;
        bf16 or fp16 at its 16-bit (tensor core) peak with 2-byte ones; None: as listed.

            >>> get_device("a100").for_dtype("fp32").peak_tflops, get_device("a100").for_dtype("bf16").peak_tflops
            (19.5, 312.0)
        """
        if dtype is None:
            return self
        if dtype not in COMPUTE_DTYPES:
            raise InputError(f"--compute-dtype: unknown {dtype!r}; choose from "
                             f"{', '.join(COMPUTE_DTYPES)}")
        act_bytes = COMPUTE_DTYPES[dtype]
        if act_bytes == self.act_bytes:
            return self
        if act_bytes == 2:   # a CPU in 16 bits: no faster arithmetic here, half the bytes
            return replace(self, act_bytes=2)
        if self.fp32_tflops is None:
            raise InputError(f"--compute-dtype fp32: no fp32 peak for device {self.name!r}; "
                             f"give its time instead (--step-ms)")
        return replace(self, peak_tflops=self.fp32_tflops, act_bytes=4)

    def with_efficiency(self, efficiency: float) -> "Device":
        if not (isinstance(efficiency, (int, float)) and math.isfinite(efficiency)
                and 0 < efficiency <= 1):
            raise InputError(f"--efficiency must be in (0, 1], got {efficiency!r}")
        return replace(self, efficiency=efficiency)


DEVICES = {d.name: d for d in (
    Device("cpu", 0.096, 20.0, 0.5, 4,
           "one x86 core with two AVX2 FMA units: 2 units × 8 fp32 lanes × 2 flops × 3 GHz "
           "= 96 GFLOP/s; ~20 GB/s of DRAM bandwidth per core"),
    Device("t4", 65.0, 320.0, 0.4, 2, "NVIDIA T4 datasheet: 65 TFLOPS fp16 tensor, "
           "8.1 TFLOPS fp32, 320 GB/s", fp32_tflops=8.1),
    Device("v100", 125.0, 900.0, 0.4, 2,
           "NVIDIA V100 SXM2 datasheet: 125 TFLOPS fp16 tensor, 15.7 TFLOPS fp32, 900 GB/s "
           "HBM2", fp32_tflops=15.7),
    Device("a100", 312.0, 2039.0, 0.4, 2,
           "NVIDIA A100 80GB SXM datasheet: 312 TFLOPS bf16 dense, 19.5 TFLOPS fp32, "
           "2039 GB/s HBM2e", fp32_tflops=19.5),
    Device("h100", 989.0, 3350.0, 0.4, 2,
           "NVIDIA H100 SXM datasheet: 989 TFLOPS bf16 dense, 67 TFLOPS fp32, 3350 GB/s HBM3",
           fp32_tflops=67.0),
    Device("h200", 989.0, 4800.0, 0.4, 2,
           "NVIDIA H200 SXM: the H100's GH100 compute (1979 TFLOPS bf16 with sparsity = 989 "
           "dense, 67 TFLOPS fp32), 4800 GB/s HBM3e (141 GB), as spec pages quoting NVIDIA "
           "give it; the datasheet itself was not at hand", fp32_tflops=67.0),
    Device("b200", 2250.0, 8000.0, 0.4, 2,
           "NVIDIA HGX B200 (1000 W): 2250 TFLOPS bf16 dense, 8000 GB/s HBM3e, from NVIDIA's "
           "figures as glennklockwood.com/garden/processors/B200 tabulates them; the "
           "datasheet itself was not at hand"),
)}


def get_device(name: str) -> Device:
    try:
        return DEVICES[name.lower()]  # users write H100 as often as h100
    except KeyError:
        raise InputError(f"unknown device {name!r}; choose from {', '.join(DEVICES)}") from None

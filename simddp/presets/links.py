"""Link presets, each with where its numbers come from (see docs/LINKS.md for the table).

These are starting points for "what if" questions; a link calibrated on your own cluster by
``python -m calibrate`` beats any of them. busbw is nccl-tests' bus bandwidth in GB/s::

    >>> get_link("eth-100g").busbw_gbps
    11.0
"""
from __future__ import annotations

from simddp.errors import InputError
from simddp.link import Link

LINKS = {link.name: link for link in (
    Link("nvlink-a100", alpha_s=15e-6, busbw_gbps=200.0, backend="nccl",
         source="nccl-tests all_reduce_perf on 8×A100-SXM4-80GB over NVLink3 reports "
                "busbw ≈ 200–210 GB/s at ≥ 256 MB (NVIDIA/nccl-tests#149, #178); α is the "
                "~15 µs small-message time of the same runs"),
    Link("nvlink-h100", alpha_s=30e-6, busbw_gbps=370.0, backend="nccl",
         source="8×H100 SXM over NVLink4/NVSwitch, ring: 450 GB/s line rate less ~20% "
                "protocol overhead gives busbw ≈ 370 GB/s with NCCL_ALGO=RING "
                "(NVIDIA/nccl-tests#212); 368.8 GB/s reported with NVLS disabled "
                "(nccl-tests#309). α: a ring's latency grows with the ranks; 8×A100 ring "
                "measured 33.7 µs (2 GPUs: 10 µs, nccl-tests#123); no H100 figure found"),
    Link("nvlink-h100-nvls", alpha_s=30e-6, busbw_gbps=480.0, backend="nccl",
         source="8×H100 with NVLink SHARP (NCCL's default all-reduce there): peak busbw "
                "≈ 480 GB/s, algbw ≈ 275 GB/s, reached above 256 MB only "
                "(NVIDIA/nccl-tests#212); 476 GB/s measured on one H100 node (nccl-tests#290), "
                "475 GB/s on 8×H200, same NVLink4 (nccl-tests#272). An upper bound for "
                "DDP's 25 MB buckets; busbw holds for 8 ranks only. α as nvlink-h100"),
    Link("nvlink-h200", alpha_s=30e-6, busbw_gbps=370.0, backend="nccl",
         source="8×H200 SXM: the same NVLink4/NVSwitch as H100 (450 GB/s each way), so "
                "nvlink-h100's ring figure, 370 GB/s (NVIDIA/nccl-tests#212); no H200 ring "
                "run found. Measured on 8×H200 with NCCL's default all-reduce (NVLS): "
                "475 GB/s peak busbw (nccl-tests#272), as nvlink-h100-nvls. α as nvlink-h100"),
    Link("ib-8xndr", alpha_s=45e-6, busbw_gbps=380.0, backend="nccl",
         source="H100 nodes with 8× NDR 400 Gb/s (ConnectX-7) each: 48–49 GB/s per NIC "
                "(NVIDIA/nccl-tests#267), 46–48 (nccl-tests#290), so 368–392 GB/s per node; "
                "NVIDIA: ~48 GB/s per NIC, 'up to ~396GB/s with the RING protocol' "
                "(nccl-tests#319). α: 2 nodes × 8 Hopper (H20) with 16 NDR NICs took "
                "46–49 µs for small all-reduces (NVIDIA/nccl#1244)"),
    Link("ib-4xhdr", alpha_s=30e-6, busbw_gbps=85.0, backend="nccl",
         source="3 nodes × 8 A100 with 4× HDR 200 Gb/s IB per node: nccl-tests busbw "
                "≈ 85 GB/s average, 96 GB/s peak, of a 100 GB/s wire (NVIDIA/nccl-tests#119)"),
    Link("ib-hdr", alpha_s=25e-6, busbw_gbps=22.0, backend="nccl",
         source="one 200 Gb/s HDR port per node = 25 GB/s wire; ~88% busbw efficiency, "
                "as in the 4× HDR runs above"),
    Link("eth-100g", alpha_s=40e-6, busbw_gbps=11.0, backend="nccl",
         source="100 Gb/s RoCE = 12.5 GB/s wire; ~88% busbw efficiency; α ≈ 40 µs for a "
                "NIC round trip plus NCCL launch"),
    Link("eth-25g", alpha_s=60e-6, busbw_gbps=2.6, backend="nccl",
         source="25 Gb/s Ethernet with NCCL's socket transport = 3.125 GB/s wire; ~83% "
                "efficiency over TCP; α ≈ 60 µs (kernel TCP stack)"),
    Link("eth-10g", alpha_s=80e-6, busbw_gbps=1.05, backend="gloo",
         source="10 Gb/s Ethernet = 1.25 GB/s wire; ~84% efficiency over TCP; α ≈ 80 µs "
                "(kernel TCP plus Gloo's per-call overhead)"),
)}
DEFAULT_LINK = "eth-100g"


def get_link(name: str) -> Link:
    try:
        return LINKS[name]
    except KeyError:
        raise InputError(f"unknown link {name!r}; choose from {', '.join(LINKS)} "
                         "or a link FILE.json from python -m calibrate") from None

"""Link presets, each with where its numbers come from (see docs/LINKS.md for the table).

These are starting points for "what if" questions; a link calibrated on your own cluster by
``python -m calibrate`` beats any of them. busbw is nccl-tests' bus bandwidth in GB/s::

    >>> get_link("eth-100g").busbw_gbps
    11.0
"""
from __future__ import annotations

import json
from importlib import resources

from simddp.errors import InputError
from simddp.cost import GB, Curve, bus_factor, bytes_s
from simddp.cost.fitted import BUCKET_RANGE_BYTES, fit_line
from simddp.inputs.link import Link

CURVES_FORMAT = "simddp.preset-curves/1"


def _curve_preset(name: str) -> Link:
    """The preset ``name`` from simddp/presets/curves/NAME.json: each table (a published
    nccl-tests busbw column, cited row by row in the file) becomes a measured curve, the time
    at each size being what nccl-tests' busbw means, f(p)·n/busbw (simddp.cost.bytes_s). α and
    busbw are the line fitted to the all_reduce curve over DDP's bucket range, 1–100 MB
    (simddp.cost.fitted): what the closed form reads, good for that range only; the curve
    answers at every size."""
    data = json.loads(resources.files("simddp.presets").joinpath(
        "curves", f"{name}.json").read_text(encoding="utf-8"))
    assert data["format"] == CURVES_FORMAT and data["name"] == name, name
    curves = tuple(Curve(t["kind"], t["ranks"], tuple(t["bytes"]),
                         tuple(bytes_s(t["kind"], n, t["ranks"], bw)
                               for n, bw in zip(t["bytes"], t["busbw_gbps"])),
                         t["nodes"], t["algorithm"], t["source"]) for t in data["tables"])
    ranks = next(c.ranks for c in curves if c.kind == "all_reduce")
    draft = Link(name, 0.0, 1.0, backend=data["backend"], curves=curves)
    alpha_s, beta = fit_line(draft, ranks)
    busbw_gbps = round(bus_factor(ranks) / (beta * GB), 1)
    lo, hi = BUCKET_RANGE_BYTES
    return Link(name, alpha_s=round(alpha_s, 7), busbw_gbps=busbw_gbps, backend=data["backend"],
                curves=curves, source=(
                    f"{data['summary']}; from {'; '.join(data['citations'])}. α and busbw: "
                    f"fitted to that curve over {lo / 1e6:g}–{hi / 1e6:g} MB at {ranks} ranks "
                    "(the closed form's line, good for that range only); the curve answers "
                    "at every size (simddp/presets/curves/" + name + ".json)"))

LINKS = {link.name: link for link in (
    _curve_preset("nvlink-a100"),
    Link("nvlink-h100", alpha_s=30e-6, busbw_gbps=370.0, backend="nccl",
         source="8×H100 SXM over NVLink4/NVSwitch, ring: 450 GB/s line rate less ~20% "
                "protocol overhead gives busbw ≈ 370 GB/s with NCCL_ALGO=RING "
                "(NVIDIA/nccl-tests#212); 368.8 GB/s reported with NVLS disabled "
                "(nccl-tests#309). α: a ring's latency grows with the ranks; 8×A100 ring "
                "measured 33.7 µs (2 GPUs: 10 µs, nccl-tests#123); no H100 figure found"),
    _curve_preset("nvlink-h100-nvls"),
    _curve_preset("nvlink-h200"),
    _curve_preset("nvlink-gb200"),
    _curve_preset("pcie-2x2080ti"),
    _curve_preset("a3mega-2x8xh100"),
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
                "as ib-4xhdr's 4× HDR runs measured (NVIDIA/nccl-tests#119)"),
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

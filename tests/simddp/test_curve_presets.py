"""Every curve preset reproduces the published table it cites, as a user would check it:
``python -m simddp collectives --link PRESET --world-size N --measured LOG``, LOG being the
table written out in nccl-tests' layout (time = f(p)·n/busbw, what busbw means)."""
from __future__ import annotations

import json
from importlib import resources

import pytest

from simddp.cli.main import main
from simddp.cost import bytes_s, kind_factor
from simddp.cost.factors import bus_factor
from simddp.cost.fitted import fit_line
from simddp.presets import LINKS

CURVE_PRESETS = sorted(p.name[:-5] for p in
                       resources.files("simddp.presets").joinpath("curves").iterdir()
                       if p.name.endswith(".json"))
SMALLEST_CHECKED = 64 << 10   # the issue's bar: every size from 64 KiB to the table's largest


def _table(name):
    data = json.loads(resources.files("simddp.presets").joinpath(
        "curves", f"{name}.json").read_text())
    return data, data["tables"][0]


def _as_nccl_tests_log(t) -> str:
    hosts = [f"node{r * t['nodes'] // t['ranks']}" for r in range(t["ranks"])]
    lines = ["# nThread 1 nGpus 1 minBytes 1 maxBytes 1 step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0"]
    lines += [f"#  Rank {r:2d} Group  0 Pid 1 on {h} device 0 [0x00] GPU"
              for r, h in enumerate(hosts)]
    lines.append("#       size         count      type   redop    root     time   algbw   "
                 "busbw #wrong     time   algbw   busbw #wrong")
    for n, bw in zip(t["bytes"], t["busbw_gbps"]):
        time_us = bytes_s(t["kind"], n, t["ranks"], bw) * 1e6
        algbw = bw / kind_factor(t["kind"], t["ranks"])
        lines.append(f"{n:12d} {n // 4:12d}     float     sum      -1 {time_us:10.2f} "
                     f"{algbw:7.2f} {bw:7.2f}      0 {time_us:10.2f} {algbw:7.2f} {bw:7.2f}      0")
    return "\n".join(lines) + "\n"


def test_there_are_curve_presets_for_the_hardware_the_issue_names():
    # not yet: 8×H100 ring (nvlink-h100) and 2 × 8 H100 over 8× 400G (ib-8xndr); docs/LINKS.md
    # says what was found for them and why none of it covers 64 KiB up
    assert {"nvlink-a100", "nvlink-h100-nvls", "nvlink-h200", "nvlink-gb200",
            "pcie-2x2080ti", "a3mega-2x8xh100"} <= set(CURVE_PRESETS)


@pytest.mark.parametrize("name", CURVE_PRESETS)
def test_preset_reproduces_its_table_within_10_percent(name, tmp_path, capsys):
    data, t = _table(name)
    assert data["citations"] and t["source"]
    log = tmp_path / f"{name}.log"
    log.write_text(_as_nccl_tests_log(t))
    assert main(["collectives", "--link", name, "--world-size", str(t["ranks"]),
                 "--measured", str(log), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    checked = [r for r in rows if r["bytes"] >= SMALLEST_CHECKED]
    assert checked and checked[-1]["bytes"] == t["bytes"][-1]
    worst = max(checked, key=lambda r: abs(r["error_pct"]))
    assert abs(worst["error_pct"]) <= 10.0, (name, worst)


@pytest.mark.parametrize("name", CURVE_PRESETS)
def test_preset_keeps_a_bucket_range_fit_and_says_so(name):
    link = LINKS[name]
    assert link.curves and link.alpha_s >= 0 and link.busbw_gbps > 0
    # α and busbw are the line fitted over DDP's bucket range, and the source says over which
    alpha_s, beta = fit_line(link, link.curves[0].ranks)
    assert link.alpha_s == round(alpha_s, 7)
    assert link.busbw_gbps == round(bus_factor(link.curves[0].ranks) / (beta * 1e9), 1)
    assert "1–100" in link.source
    # A line follows NCCL's curve only roughly, which is why presets carry curves. Over the
    # fit's range (41 sizes, 1-100 MB) the line's median error is 5-10 % on one node
    # (nvlink-gb200's max 29 %, at 1 MB), 23 % on a3mega's 2-node table (time nearly flat
    # from 16 to 32 MiB, then steep): the bound says a fit is not off by more than that.
    p = link.curves[0].ranks
    errors = sorted(abs((link.alpha_s + bytes_s("all_reduce", n, p, link.busbw_gbps))
                        / link.collective_s("all_reduce", n, p) - 1)
                    for n in (1e6 * 10 ** (i / 20) for i in range(41)))
    assert errors[20] <= (0.12 if link.curves[0].nodes == 1 else 0.25), (name, errors[20])


def test_curve_presets_ship_in_the_package():
    assert all(resources.files("simddp.presets").joinpath("curves", f"{n}.json").is_file()
               for n in CURVE_PRESETS)

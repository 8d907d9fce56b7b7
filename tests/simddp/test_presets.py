"""Presets carry their sources, and docs/LINKS.md's table says what simddp/presets/links.py does."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simddp.presets import DEVICES, LINKS

LINKS_MD = Path(__file__).resolve().parents[2] / "docs" / "LINKS.md"


def doc_rows() -> dict[str, list[str]]:
    rows = {}
    for line in LINKS_MD.read_text().splitlines():
        match = re.match(r"\| `([\w.-]+)` \|(.*)\|$", line)
        if match:
            rows[match[1]] = [cell.strip() for cell in match[2].split("|")]
    return rows


def test_links_md_lists_every_link_preset_with_its_numbers_and_source():
    rows = doc_rows()
    assert list(rows) == list(LINKS)
    for name, link in LINKS.items():
        alpha_us, busbw, backend, source = rows[name]
        assert (float(alpha_us), float(busbw), backend) == (
            pytest.approx(link.alpha_s * 1e6), link.busbw_gbps, link.backend), name
        assert source.replace("`", "") == link.source, name


@pytest.mark.parametrize("name", ["nvlink-h100", "ib-8xndr"])
def test_hopper_links_cite_a_thread(name):
    assert re.search(r"nccl(-tests)?#\d+", LINKS[name].source)


def test_nvls_preset_is_the_published_azure_table():
    nvls = LINKS["nvlink-h100-nvls"]
    assert "Azure/AI-benchmarking-guide" in nvls.source and "ND_H100_v5" in nvls.source
    assert nvls.curves[0].ranks == 8 and nvls.curves[0].bytes[-1] == 8 << 30


def test_hopper_and_blackwell_devices():
    assert DEVICES["h200"].peak_tflops == DEVICES["h100"].peak_tflops    # same GH100 compute
    assert DEVICES["h200"].mem_gbps > DEVICES["h100"].mem_gbps
    assert DEVICES["b200"].peak_tflops > 2 * DEVICES["h100"].peak_tflops
    assert all(d.source for d in DEVICES.values())


def test_h200_has_an_nvlink_preset_that_cites_its_h200_run():
    h200 = LINKS["nvlink-h200"]
    assert "stas00/ml-engineering" in h200.source and "all-reduce-8xH200.md" in h200.source
    assert h200.curves[0].ranks == 8 and h200.curves[0].bytes[-1] == 16 << 30


def test_the_pcie_pair_is_two_gpus_without_nvlink_from_its_published_log():
    pair = LINKS["pcie-2x2080ti"]
    assert "Anthony-Hoo/Anthony-Hoo.github.io" in pair.source and "NVLink" in pair.source
    curve = pair.curves[0]
    assert (curve.ranks, curve.nodes, curve.bytes[0], curve.bytes[-1]) == (2, 1, 1 << 10, 1 << 30)
    # flat from 1 MiB (3.74-4.00 GB/s busbw), so the fitted line is the table's 4.0 GB/s
    assert pair.busbw_gbps == 4.0 and 15e-6 < pair.alpha_s < 25e-6


@pytest.mark.parametrize("device", ["a100", "h100", "h200"])
def test_sweep_over_nodes_takes_the_device_nvlink_preset(device, capsys):
    from simddp.cli.main import main
    assert main(["sweep", "--nodes", "2", "--gpus-per-node", "8", "--device", device,
                 "--link", "ib-8xndr", "--model", "mlp-8x1024", "--strategies", "ddp",
                 "--bucket-mb", "25", "--format", "json"]) == 0
    topology = json.loads(capsys.readouterr().out)["setup"]["topology"]
    assert topology["intra_link"] == "nvlink-" + device


def test_b200_over_nodes_asks_for_the_intra_link(capsys):
    from simddp.cli.main import main
    assert main(["sweep", "--nodes", "2", "--gpus-per-node", "8", "--device", "b200",
                 "--link", "ib-8xndr", "--model", "mlp-8x1024"]) == 2
    err = capsys.readouterr().err     # names the device, and the flag to give the link with
    assert err.count("\n") == 1 and "b200;" in err.split() and "--intra-link:" in err.split()

"""Presets carry their sources, and docs/LINKS.md's table says what simddp/presets/links.py does."""
from __future__ import annotations

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


@pytest.mark.parametrize("name", ["nvlink-h100", "nvlink-h100-nvls", "ib-8xndr"])
def test_hopper_links_cite_a_thread(name):
    assert re.search(r"nccl(-tests)?#\d+", LINKS[name].source)


def test_hopper_and_blackwell_devices():
    assert DEVICES["h200"].peak_tflops == DEVICES["h100"].peak_tflops    # same GH100 compute
    assert DEVICES["h200"].mem_gbps > DEVICES["h100"].mem_gbps
    assert DEVICES["b200"].peak_tflops > 2 * DEVICES["h100"].peak_tflops
    assert all(d.source for d in DEVICES.values())

"""Issue 23, item 5: the numbers and paths a new user reads in their first sweeps."""
from __future__ import annotations

import json
from pathlib import Path

from simddp.analytic.optimal_bucket import closed_form_optimum, format_optimum
from simddp.inputs.link import Link
from simddp.presets.models import parse_model
from simddp import build_profile
from simddp.report.recommendation import torch_call_text
from simddp.report.table import fmt_mb, setup_line
from tests.simddp.test_cli import cli

ROOT = Path(__file__).resolve().parents[2]


def test_a_tenth_of_a_mb_reads_as_typed(capsys):
    assert fmt_mb(0.1 * 2**20 // 1 / 2**20) == "0.1"  # 104857 bytes
    assert fmt_mb(0.099999) == "0.1"  # the same, as a results file keeps it
    code, out, _ = cli(capsys, "sweep", "--bucket-mb", "0.1,1", "--strategies", "bucketed,ddp")
    assert code == 0 and "0.099999" not in out
    assert any(line.split()[:2] == ["bucketed", "0.1"] for line in out.splitlines())


def test_the_link_reads_in_three_digits():
    profile = build_profile(parse_model("transformer-small"))
    line = setup_line(profile, Link("cal", 123.456e-6, 0.838879), 2)
    assert "α 123 µs, busbw 0.839 GB/s" in line


def test_torch_call_at_1_mb_is_a_plain_cap():
    assert "bucket_cap_mb_list" not in torch_call_text(1.0)
    assert "DistributedDataParallel(model, bucket_cap_mb=1)" in torch_call_text(1.0)
    assert "bucket_cap_mb_list=[1, 10]" in torch_call_text(10.0)


def test_no_latency_has_no_closed_form_optimum(tmp_path, capsys):
    link = Link("zero", 0.0, 10.0)
    opt = closed_form_optimum(build_profile(parse_model("transformer-small")), link, 2)
    assert format_optimum(opt).startswith("closed-form optimum (bucketed, α–β): none — ")
    path = tmp_path / "link.json"
    path.write_text(json.dumps({"format": "simddp.link/1", "name": "zero", "alpha_s": 0.0,
                                "busbw_gbps": 10.0}))
    code, out, _ = cli(capsys, "sweep", "--link", str(path), "--bucket-mb", "1,10")
    assert code == 0 and "e-07 MB" not in out and "differs from the closed form" not in out


def test_a_python_file_as_model_points_to_realrun_profile(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("my_model.py").write_text("import torch\n")
    code, out, err = cli(capsys, "sweep", "--model", "my_model.py")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "python -m realrun profile --module my_model.py:FN" in err
    assert "not valid JSON" not in err


def test_plot_writes_the_format_its_suffix_names(tmp_path, capsys):
    for name, magic in (("g.jpg", b"\xff\xd8"), ("g.png", b"\x89PNG"), ("g.svg", b"<?xml")):
        assert cli(capsys, "simulate", "--plot", str(tmp_path / name))[0] == 0
        assert (tmp_path / name).read_bytes().startswith(magic), name
    code, out, err = cli(capsys, "simulate", "--plot", str(tmp_path / "g.gif"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "end the name in .png" in err
    assert not (tmp_path / "g.gif").exists()


def test_readme_says_where_the_shipped_examples_are():
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "--module examples/" in text
    assert "examples/` (not in the installed package: run these from the checkout" in text

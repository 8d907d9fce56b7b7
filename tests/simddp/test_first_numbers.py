"""Issue 23, item 5: the numbers and paths a new user reads in their first sweeps."""
from __future__ import annotations

import json
import re
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
    words = line.replace(",", " ").split()
    assert words[words.index("α") + 1] == "123" and words[words.index("busbw") + 1] == "0.839"
    assert "123.456" not in line and "0.838879" not in line


def ddp_call(text: str) -> tuple[str, str]:
    """The keyword and value of the DistributedDataParallel(model, ...) call a line gives."""
    return re.search(r"DistributedDataParallel\(model, (\w+)=(.+?)\)", text).groups()


def test_torch_call_at_1_mb_is_a_plain_cap():
    assert "bucket_cap_mb_list" not in torch_call_text(1.0)
    assert ddp_call(torch_call_text(1.0)) == ("bucket_cap_mb", "1")
    assert ddp_call(torch_call_text(10.0)) == ("bucket_cap_mb_list", "[1, 10]")


def test_no_latency_has_no_closed_form_optimum(tmp_path, capsys):
    link = Link("zero", 0.0, 10.0)
    opt = closed_form_optimum(build_profile(parse_model("transformer-small")), link, 2)
    assert opt["regime"] == "no-latency"
    assert "none" in format_optimum(opt) and "e-07" not in format_optimum(opt)
    path = tmp_path / "link.json"
    path.write_text(json.dumps({"format": "simddp.link/1", "name": "zero", "alpha_s": 0.0,
                                "busbw_gbps": 10.0}))
    code, out, _ = cli(capsys, "sweep", "--link", str(path), "--bucket-mb", "1,10",
                       "--format", "json")
    optimum = json.loads(out)["closed_form_optimum"]
    assert code == 0 and optimum["regime"] == "no-latency"
    assert optimum["differs_from_simulator"] is None     # no gap to explain: no optimum
    code, out, _ = cli(capsys, "sweep", "--link", str(path), "--bucket-mb", "1,10")
    assert code == 0 and "e-07" not in out


def test_a_python_file_as_model_points_to_realrun_profile(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("my_model.py").write_text("import torch\n")
    code, out, err = cli(capsys, "sweep", "--model", "my_model.py")
    assert code == 2 and out == "" and err.count("\n") == 1
    # it names the file and the realrun command that measures it
    assert "my_model.py" in err and "realrun" in err and "my_model.py:FN" in err


def test_plot_writes_the_format_its_suffix_names(tmp_path, capsys):
    for name, magic in (("g.jpg", b"\xff\xd8"), ("g.png", b"\x89PNG"), ("g.svg", b"<?xml")):
        assert cli(capsys, "simulate", "--plot", str(tmp_path / name))[0] == 0
        assert (tmp_path / name).read_bytes().startswith(magic), name
    code, out, err = cli(capsys, "simulate", "--plot", str(tmp_path / "g.gif"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--plot" in err and ".gif" in err and ".png," in err and ".svg," in err
    assert not (tmp_path / "g.gif").exists()


def test_readme_says_where_the_shipped_examples_are():
    text = " ".join((ROOT / "README.md").read_text().split())
    # the sentence that points at examples/ says it is in the checkout, not the package
    (where,) = [s for s in text.split(". ") if "`examples/`" in s]
    assert "checkout" in where and "installed" in where
    # and a command runs one of them: --module examples/...
    modules = [part.split()[0] for part in text.split("--module ")[1:]]
    assert any(m.startswith("examples/") for m in modules)

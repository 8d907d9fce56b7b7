"""realrun's --out: inputs are checked before an earlier output is touched (issue 23)."""
from __future__ import annotations

import json

from realrun.cli import main
from tests._messages import assert_one_line

GOOD = ("import torch\nfrom torch import nn\n"
        "def build():\n    return nn.Linear(2, 2), torch.ones(3, 2), lambda y: y.sum()\n")


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def test_profile_names_a_typo_in_module_before_looking_at_out(tmp_path, capsys):
    model = tmp_path / "model.py"
    model.write_text(GOOD)
    out = tmp_path / "profile.json"
    out.write_text(json.dumps({"format": "simddp.link/1"}))  # would be refused, but later
    assert _exit_code(["profile", "--module", f"{model}:biuld", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert_one_line(err, "--module", str(model), "biuld")   # the file and the name not in it
    assert json.loads(out.read_text()) == {"format": "simddp.link/1"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py", "profile.json"]


def test_profile_refuses_an_out_that_holds_another_kind_of_file(tmp_path, capsys):
    model = tmp_path / "model.py"
    model.write_text(GOOD)
    out = tmp_path / "link.json"
    out.write_text(json.dumps({"format": "simddp.link/1"}))
    assert _exit_code(["profile", "--module", f"{model}:build", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert_one_line(err, "--out", str(out), "simddp.link/1", "simddp.profile/1", "--force")

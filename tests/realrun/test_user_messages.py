"""Issue 53 item 6: errors and help in the words a user types, naming only what is accepted.

- `realrun bench --model nonexist` offered "or a profile FILE.json", which bench refuses;
  simddp's commands, which do read a profile file, still offer it;
- "use backend='gloo' on CPU" spoke Python to someone at a shell: `--backend gloo`;
- `python -m realrun --help` ended with "(and more to come)" and how to register a subcommand;
- `simddp sweep --link F` with only a format line once printed "Link.__init__() missing 3
  required positional arguments".

    python -m pytest tests/realrun/test_user_messages.py -q      # no ranks start, ~10 s
"""
from __future__ import annotations

import json

import pytest

from realrun.cli import main as realrun_main
from simddp.cli.main import main as simddp_main
from tests._messages import assert_names, assert_one_line, words

PRESETS = "mlp-DEPTHxWIDTH"


def one_line_error(capsys, *names: str) -> str:
    """stderr: one line, no traceback, naming each of ``names``."""
    err = capsys.readouterr().err
    assert_one_line(err, *names)
    return err


def pairs(text: str) -> set[tuple[str, str]]:
    """Each two words of ``text`` that follow each other, e.g. ("--backend", "gloo")."""
    tokens = text.split()
    return set(zip(tokens, tokens[1:]))


@pytest.mark.parametrize("command", ["bench", "validate", "profile", "selfcheck"])
def test_realrun_lists_presets_only_for_an_unknown_model(command, tmp_path, capsys):
    code = realrun_main([command, "--model", "nonexist", "--out", str(tmp_path / "o")])
    assert code == 2
    err = one_line_error(capsys, "nonexist", PRESETS)
    assert "FILE.json" not in err       # bench and validate read no profile file


@pytest.mark.parametrize("command", ["sweep", "simulate", "account", "models"])
def test_simddp_still_offers_the_profile_file_it_reads(command, capsys):
    assert simddp_main([command, "--model", "nonexist"]) == 2
    err = one_line_error(capsys, "nonexist", PRESETS)
    assert words(err.split()[-1]) == {"FILE.json"}   # offered last: the file it reads


def test_nccl_without_gpus_says_the_flag(monkeypatch):
    import torch

    from realrun.launch.context import require_gpus
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError) as e:
        require_gpus(2)
    assert str(e.value).split()[-2:] == ["--backend", "gloo"]   # the flag, as typed
    assert "backend='gloo'" not in str(e.value)


def test_realrun_help_is_for_users(capsys):
    with pytest.raises(SystemExit) as e:
        realrun_main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for developer_note in ("more to come", "COMMANDS", "register", "add_arguments",
                           "commands/<name>.py", "finish_torchrun", "``"):
        assert developer_note not in out
    commands = [line.split()[:4] for line in out.splitlines()]
    for command in ("profile", "bench", "validate", "selfcheck"):
        assert ["python", "-m", "realrun", command] in commands   # a line to copy
    assert {("--backend", "gloo"), ("--backend", "nccl")} <= pairs(out)


def test_a_link_file_with_only_its_format_names_the_missing_fields(tmp_path, capsys):
    link = tmp_path / "link.json"
    link.write_text(json.dumps({"format": "simddp.link/1"}))
    assert simddp_main(["sweep", "--link", str(link)]) == 2
    err = one_line_error(capsys, str(link), "name", "alpha_s", "busbw_gbps")   # what is missing
    assert "__init__" not in err and "positional" not in err

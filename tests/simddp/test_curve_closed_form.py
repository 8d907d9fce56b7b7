"""Issue 51 item 6: on a curve link, the closed-form optimum (sweep) and `simddp account` say
which α–β they use: the line fitted to the link's all-reduce curve over DDP's bucket range
(simddp/cost/fitted.py), with its numbers, the same in both commands."""
from __future__ import annotations

import re

from simddp.cli.main import main
from simddp.cost.fitted import closed_form_law
from simddp.presets import get_link

ARGS = ["--model", "transformer-xl", "--link", "nvlink-h100-nvls", "--world-size", "8"]


def _fitted_words() -> str:
    law = closed_form_law(get_link("nvlink-h100-nvls"), 8)
    return law.note


def test_sweep_and_account_name_the_fitted_line_they_use(capsys):
    words = _fitted_words()
    assert re.fullmatch(r"α–β fitted to the link's all_reduce curve over 1–100 MB: "
                        r"α [\d.]+ µs, busbw [\d.]+ GB/s", words), words
    assert main(["sweep", *ARGS, "--bucket-mb", "1,25,100", "--explain"]) == 0
    sweep_out = capsys.readouterr().out
    (line,) = [x for x in sweep_out.splitlines() if x.startswith("closed-form optimum")]
    assert words in line
    assert main(["account", *ARGS]) == 0
    account_out = capsys.readouterr().out
    (line,) = [x for x in account_out.splitlines() if x.startswith("closed-form optimal bucket")]
    assert words in line


def test_a_line_link_keeps_its_own_numbers_unnamed(capsys):
    assert main(["sweep", "--model", "transformer-xl", "--alpha-us", "118", "--busbw-gbps",
                 "19.7", "--world-size", "2", "--bucket-mb", "1,25", "--explain"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines()
               if x.startswith("closed-form optimum")]
    # a line link's law is its own α and busbw: nothing fitted, nothing to name
    from simddp.inputs.link import Link
    assert closed_form_law(Link("l", 118e-6, 19.7), 2).note == ""
    assert "fitted" not in line

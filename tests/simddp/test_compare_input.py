"""python -m simddp compare on bad input: one line on stderr, exit 2, no file; and malformed
values as InputErrors from the library. The grids are tests/simddp/test_compare.py's.
"""
from __future__ import annotations

import dataclasses
import json

import pytest

from simddp.cli.main import main
from simddp.compare import compare_results
from simddp.errors import InputError
from simddp.inputs.io import save_json
from tests.simddp.test_compare import grid, meas, res, write_pair


def _bad(tmp_path, capsys, predicted, measured, *extra):
    p, m = write_pair(tmp_path, predicted, measured) if not isinstance(predicted, str) else \
        (predicted, measured)
    out = tmp_path / "out"
    code = main(["compare", "--predicted", p, "--measured", m, "--out", str(out), *extra])
    err = capsys.readouterr()
    assert code == 2 and err.out == ""
    assert len(err.err.strip().splitlines()) == 1 and err.err.startswith("simddp: error: ")
    assert not out.exists()
    return err.err


def test_bad_input_exits_2_with_one_line_and_no_file(tmp_path, capsys):
    predicted, measured = grid()
    err = _bad(tmp_path, capsys, predicted, [meas("naive", None, 100, model="other")])
    assert "'toy'" in err and "'other'" in err and "--ignore-model" in err
    err = _bad(tmp_path, capsys, predicted, [meas("naive", None, 100, world=4)])
    words = err.replace(",", " ").split()
    assert "world" in words and "2" in words and "4" in words and "meas.json" in err
    err = _bad(tmp_path, capsys, predicted, [*measured, meas("ddp", 50, 70)])
    assert "ddp:50" in err and "ddp:{10,25}" in err    # the stray one, and what was predicted
    err = _bad(tmp_path, capsys, predicted, [])                       # empty grid
    assert "meas.json" in err and "pred.json" not in err
    err = _bad(tmp_path, capsys, measured, predicted)                 # swapped
    assert "swapped" in err
    err = _bad(tmp_path, capsys, predicted, [*measured, meas("ddp", 10.0000001, 51)])
    assert "ddp:10" in err and "twice" in err
    err = _bad(tmp_path, capsys, predicted, measured, "--timeline-config", "ddp:7")
    assert "ddp:7" in err
    err = _bad(tmp_path, capsys, predicted, [meas("naive", None, 0.0)])
    assert "step_s" in err and "0.0" in err.replace(",", " ").split()


def test_bad_files_exit_2(tmp_path, capsys):
    p, m = write_pair(tmp_path, *grid())
    link = tmp_path / "link.json"
    save_json(link, {"format": "simddp.link/1", "name": "x", "alpha_s": 0, "busbw_gbps": 1})
    err = _bad(tmp_path, capsys, p, str(link))
    assert "link.json" in err and "'simddp.results/1'" in err     # the file, the format wanted
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    err = _bad(tmp_path, capsys, str(garbage), m)
    assert "garbage.json" in err and "JSON" in err
    assert "missing.json" in _bad(tmp_path, capsys, p, str(tmp_path / "missing.json"))


def test_ignore_model(tmp_path, capsys):
    p, m = write_pair(tmp_path, [res("naive", None, 90)],
                      [meas("naive", None, 100, model="toy-profile")])
    assert main(["compare", "--predicted", p, "--measured", m, "--ignore-model",
                 "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["model"] == "toy / toy-profile" and summary["world_size"] == 2


def test_malformed_values_are_input_errors():
    good = meas("ddp", 25, 10)
    for field, value in (("step_s", None), ("step_s", float("nan")), ("bucket_mb", "25"),
                         ("bucket_mb", -1.0), ("accum_steps", 0), ("step_p95_s", "x")):
        bad = dataclasses.replace(good, **{field: value})
        with pytest.raises(InputError, match=field):
            compare_results([res("ddp", 25, 10)], [bad])

"""simddp.report.outdir: a rerun into the same --out keeps the earlier run; other results refuse."""
from __future__ import annotations

import json
import os

import pytest

from simddp.errors import InputError
from simddp.report.outdir import check_out_dir, check_out_file
from simddp.report.outdir import OUT_FILES

VALIDATE = ("validate.json",)


def _fill(folder, *names: str) -> None:
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text(name)


def test_a_rerun_moves_the_earlier_runs_files_into_a_dated_folder(tmp_path, capsys):
    out = tmp_path / "validate"
    _fill(out, "validate.json", "measured.json", "compare.json", "compare_scatter.png",
          "notes.txt")
    os.utime(out / "validate.json", (0, 1795961000))  # the earlier run's time names the folder
    assert check_out_dir(out, files=VALIDATE) == out
    (kept,) = out.glob("earlier-*")
    assert kept.name.startswith("earlier-2026")  # local time of 1795961000 s
    assert sorted(p.name for p in kept.iterdir()) == [
        "compare.json", "compare_scatter.png", "measured.json", "validate.json"]
    assert sorted(p.name for p in out.iterdir()) == [kept.name, "notes.txt"]  # not ours: stays
    assert capsys.readouterr().err == f"note: kept the earlier run's 4 files in {kept}\n"
    # Twice in the same second: a second folder, never a merge.
    _fill(out, "validate.json")
    os.utime(out / "validate.json", (0, 1795961000))
    check_out_dir(out, files=VALIDATE)
    assert sorted(p.name for p in out.glob("earlier-*")) == [kept.name, kept.name + "-2"]


def test_a_new_or_empty_folder_is_left_alone(tmp_path, capsys):
    assert check_out_dir(tmp_path / "new" / "deeper", files=VALIDATE) == tmp_path / "new" / "deeper"
    assert check_out_dir(tmp_path, files=VALIDATE) == tmp_path
    assert check_out_dir(None, files=VALIDATE) is None
    assert capsys.readouterr().err == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("present, files, owner", [
    ("sweep.json", VALIDATE, "simddp sweep"),
    ("validate.json", ("compare.json",), "realrun validate"),  # validate's compare.json
    ("allreduce.json", ("bench.json", "bench.csv"), "calibrate"),
])
def test_another_commands_results_are_refused_and_left_in_place(tmp_path, present, files, owner):
    _fill(tmp_path, present)
    with pytest.raises(InputError) as info:
        check_out_dir(tmp_path, files=files)
    assert str(info.value).startswith(f"--out {tmp_path}: holds {present} from {owner}, not ")
    assert "\n" not in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == [present]
    assert check_out_dir(tmp_path, files=files, force=True) == tmp_path  # writes beside them
    assert [p.name for p in tmp_path.iterdir()] == [present]


def test_force_replaces_in_place_and_a_file_is_no_folder(tmp_path):
    _fill(tmp_path, "sweep.json")
    check_out_dir(tmp_path, files=("sweep.json",), force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.json"]
    with pytest.raises(InputError, match="exists and is not a directory"):
        check_out_dir(tmp_path / "sweep.json", files=("sweep.json",))


def test_every_command_has_its_own_marker():
    markers = [names[0] for names in OUT_FILES.values()]
    assert len(set(markers)) == len(markers)


def test_an_earlier_profile_is_kept_and_another_file_refused(tmp_path, capsys):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"format": "simddp.profile/1"}))
    assert check_out_file(path, "simddp.profile/1") == path and not path.exists()
    (kept,) = tmp_path.glob("profile.*.json")
    assert capsys.readouterr().err == f"note: kept the earlier profile.json as {kept}\n"
    path.write_text(json.dumps({"format": "simddp.link/1"}))
    with pytest.raises(InputError, match=r"holds a simddp.link/1 file, not simddp.profile/1; "
                                         r"choose another --out, or pass --force"):
        check_out_file(path, "simddp.profile/1")
    assert check_out_file(path, "simddp.profile/1", force=True) == path and path.exists()
    with pytest.raises(InputError, match="is a directory; give a file name, e.g. profile.json"):
        check_out_file(tmp_path, "simddp.profile/1")

"""simddp trace-import of fewer traces than the job had ranks warns in one line (issue 23)."""
from __future__ import annotations

from tests.simddp.hand_traces import cli, job, write


def test_one_rank_of_two_gets_a_one_line_warning(tmp_path, capsys):
    paths = write(tmp_path, job())  # rank 0's and rank 1's traces of a 2-rank job
    code, _, err = cli(capsys, "trace-import", paths[0], "--out", str(tmp_path / "one"))
    assert code == 0, err
    assert ("warning: 1 trace(s) of a 2-rank job: the profile and link describe only those "
            "ranks; pass one trace per rank\n") in err
    code, _, err = cli(capsys, "trace-import", *paths, "--out", str(tmp_path / "both"))
    assert code == 0 and "warning" not in err

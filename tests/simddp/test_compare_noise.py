"""python -m simddp compare and the bench's own noise floor: how far apart realrun bench's two
identical compute-only models read (instance_gap, realrun/twin.py; simddp/compare/noise.py)."""
from __future__ import annotations

import json

from simddp.cli import main
from tests.simddp.test_compare import grid, write_pair


def test_the_benchs_twin_distance_is_reported_and_a_bad_one_refused(tmp_path, capsys):
    """realrun bench writes how far apart two identical compute-only models read
    (instance_gap, realrun/twin.py); compare says it under the best bucket, and in JSON."""
    p, m = write_pair(tmp_path, *grid())
    doc = json.loads(open(m).read())
    json.dump({**doc, "instance_gap": {"compute_only_ms": 50.0, "twin_ms": 52.0,
                                       "apart_pct": 4.0}}, open(m, "w"))
    assert main(["compare", "--predicted", p, "--measured", m]) == 0
    out = capsys.readouterr().out
    assert "two identical compute-only models in the bench read 4.0 % apart" in out
    assert main(["compare", "--predicted", p, "--measured", m, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["instance_gap_pct"] == 4.0
    json.dump({**doc, "instance_gap": {"apart_pct": -1}}, open(m, "w"))
    assert main(["compare", "--predicted", p, "--measured", m]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "instance_gap must hold apart_pct" in err[0]

"""simddp trace-import of a real one-rank trace (torch DDP, Gloo, world size 1), end to end.

    python -m pytest tests/realrun/test_trace_import_one_rank.py -q      # ~15 s on 2 cores

The CPU twin of the gpu tier's one-GPU test (tests/gpu/test_trace_and_sharding_cuda.py,
issue 20 bug 3): a one-rank trace moves nothing over a network, so the import takes the
gradients and their ready times from it and the link from --link.
"""
from __future__ import annotations

import glob

import pytest

from simddp.errors import InputError
from simddp.presets import get_link
from simddp.ingest.trace import import_traces


@pytest.mark.slow
def test_a_real_one_rank_trace_imports_with_a_given_link(tmp_path):
    from realrun.launch import run_world
    from realrun.workload import Workload
    from simddp.presets.models import parse_model
    small = parse_model("transformer-small").shrunk(layers=2, d_model=64, d_ff=128, heads=4,
                                                    vocab=256)
    (got,) = run_world("tests.gpu._targets:trace_ddp",
                       {"dir": str(tmp_path), "steps": 5,
                        "workload": Workload.preset(small, 2, 16).to_json()},
                       world_size=1, backend="gloo", timeout_s=120)
    paths = glob.glob(str(tmp_path / "*.pt.trace.json*"))
    with pytest.raises(InputError, match="add --link"):
        import_traces(paths)
    imp = import_traces(paths, link=get_link("eth-100g"))
    assert imp.link == get_link("eth-100g") and imp.world_size == 1
    assert imp.profile.grad_total_bytes == got["grad_bytes"]
    assert len(imp.joint) == 5 and imp.traced.strategy.name == "ddp"
    # the traced configuration, re-run at one rank with free all-reduces: the steps' median
    # (measured: -0.6 % on a quiet box; the host's noise is what the bound allows for)
    assert abs(imp.reproduction_error) < 0.15

"""realrun's side of compute after communication (simddp.inputs.host.Host.compute_after_comm):
what the profile's and validate's contention probe give it. The profile CLI's own check is in
tests/realrun/test_profiler.py."""
import pytest

from realrun.launch.contention_timing import compute_after_comm
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.result import Result


def test_the_ratio_is_the_slowest_ranks_and_at_least_one():
    assert compute_after_comm([{"compute_alone_s": 0.02}, {"compute_alone_s": 0.03}],
                              0.025) == pytest.approx(1.2)
    assert compute_after_comm([{"compute_alone_s": 0.02}], 0.025) == 1.0
    assert compute_after_comm([], 0.025) is None
    assert compute_after_comm([{"compute_alone_s": 0.02}], 0.0) is None


def test_the_anchored_prediction_computes_after_comm_at_the_probes_ratio():
    """The probe's compute alone (after its stream) over the anchored forward + backward:
    50 ms of compute anchored to 60 (x1.2), so forward + backward 48 ms; the probe's slower
    rank computed 54 ms alone: x1.125."""
    from realrun.workflows.validate.pipeline import prediction_inputs
    from realrun.workflows.validate.settings import ValidateSettings
    from simddp.inputs.host import Host
    from simddp.inputs.profile import Layer, ModelProfile
    profile = ModelProfile("m", (Layer("a", (4,), 0.010, 0.020), Layer("b", (4,), 0.005, 0.005)),
                           optimizer_s=0.010)
    row = Result("m", "l", "compute-only", None, 2, 0.060, 0.0, 0, source="measured")
    probe = {"compute_alone_s": 0.054, "comm_alone_s": 0.020, "compute_together_s": 0.060,
             "comm_together_s": 0.030}
    probes = {"probe:contention": {"median_s": 0.1, "per_rank": [probe, {**probe,
                                                                      "compute_alone_s": 0.05}]}}
    host = Host("h", contention=(1.5, 1.5), compute_after_comm=1.3)
    link = LinkFile(Link("l", 1e-3, 1.0, world_size=2))
    inputs = prediction_inputs(ValidateSettings(), link, profile, host, [row], probes)
    assert inputs["host"].compute_after_comm == pytest.approx(1.125)
    # without the anchor, the profile phase's own factor stays
    unanchored = prediction_inputs(ValidateSettings(anchor_compute=False), link, profile, host,
                                   [row], probes)
    assert unanchored["host"].compute_after_comm == 1.3

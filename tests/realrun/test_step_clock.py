"""realrun/step_clock.py: a collective's completion is stamped whatever handle its launch
returns (a c10d Work, or hierarchical's two-level _Pending around a concurrent Future)."""
from concurrent.futures import Future

import torch

from realrun.launch.two_level import _Pending
from realrun.step_clock import _clock_bucket


class _Bucket:
    """A FlatBucket's launch surface: ``launch(async_op)`` leaves its handle in ``_work``."""

    def __init__(self, make_work) -> None:
        self.make_work, self._work = make_work, None

    def launch(self, async_op: bool) -> None:
        self._work = self.make_work() if async_op else None


def _stamped(make_work, finish) -> list:
    comm = [["bucket 0", 1.0, None, 4]]
    bucket = _Bucket(make_work)
    _clock_bucket(bucket, comm, clock=lambda: 7.0)
    bucket.launch(True)
    assert comm[0][2] is None          # not done yet: nothing stamped
    finish(bucket._work)
    return comm[0]


def test_a_c10d_work_is_stamped_by_its_future():
    fut = torch.futures.Future()

    class Work:
        def get_future(self):
            return fut
    assert _stamped(Work, lambda w: fut.set_result(None))[2] == 7.0


def test_a_two_level_all_reduce_is_stamped_by_its_concurrent_future():
    """hierarchical's handle has no get_future (bench --timelines failed on it)."""
    assert _stamped(lambda: _Pending(Future()), lambda w: w.future.set_result(None))[2] == 7.0


def test_a_blocking_launch_is_stamped_at_once():
    comm = [["bucket 0", 1.0, None, 4]]
    bucket = _Bucket(lambda: None)
    _clock_bucket(bucket, comm, clock=lambda: 3.0)
    bucket.launch(False)
    assert comm[0][2] == 3.0


def test_torch_ddp_is_clocked_by_a_comm_hook_that_averages_as_torch_does():
    """Two ranks: after torch's own steps a clocking hook goes in (once; a second is
    refused), stamps every bucket's launch and end, and the gradients are still the mean."""
    from realrun.launch import run_world
    for rank in run_world("tests.realrun._step_clock_targets:clocked_torch_ddp", {},
                          world_size=2, timeout_s=60):
        assert rank["first"] is True and rank["again"] is False and rank["same"]
        assert len(rank["comm"]) >= 2                       # several buckets, each stamped
        assert all(launch <= end for _, launch, end, _ in rank["comm"])
        assert sum(n for *_, n in rank["comm"]) == rank["bytes"]

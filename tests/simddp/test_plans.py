"""The plan: which gradients go into which collective, ready after which layer, in what order.

The toy model used throughout: 3 layers l0, l1, l2 (forward order), one 1 MiB gradient each,
so tensor ids are 0, 1, 2 and gradients become ready in the order 2, 1, 0. Each row below is
``(label, tensor_ids, MiB, ready_layer, launch_index, micro_step)``.
"""
from __future__ import annotations

from itertools import accumulate

import numpy as np
import pytest

from simddp.errors import InputError
from simddp.planning.plans import Collective, group_tensors, plan
from simddp.inputs.profile import Layer, ModelProfile
from simddp.planning.strategy import (ACCUM_BASELINE, DDP_DEFAULT_BUCKET_MB, MB, STRATEGIES, Strategy,
                             make_strategy, mb_to_bytes)

TOY = ModelProfile("toy3", tuple(Layer(f"l{i}", (MB,), 1e-3, 2e-3) for i in range(3)))


def rows(p) -> list[tuple]:
    return [(c.label, c.tensor_ids, c.nbytes / MB, c.ready_layer, c.launch_index, c.micro_step)
            for c in p.collectives]


# --- strategies ----------------------------------------------------------------------------

def test_make_strategy_fields():
    assert make_strategy("naive") == Strategy("naive", "tensor", overlap=False)
    assert make_strategy("flat") == Strategy("flat", "all", overlap=False)
    assert make_strategy("overlap", accum_steps=3) == Strategy("overlap", "tensor", True,
                                                               accum_steps=3)
    # The textbook bucketed DDP: no small first bucket.
    assert make_strategy("bucketed", 2) == Strategy("bucketed", "bucket", True, 2 * MB, 2 * MB)
    # torch DDP: 1 MiB first bucket ("1MB is a reasonable value"), then the cap (25 MiB default).
    assert make_strategy("ddp") == Strategy("ddp", "bucket", True, 25 * MB, MB,
                                            implementation="torch")
    assert make_strategy("ddp").bucket_mb == DDP_DEFAULT_BUCKET_MB
    assert make_strategy("no_sync", 4, accum_steps=2) == Strategy(
        "no_sync", "bucket", True, 4 * MB, MB, 2, sync_last_only=True, implementation="torch")
    assert make_strategy(ACCUM_BASELINE, 4, accum_steps=2) == Strategy(
        "sync_each", "bucket", True, 4 * MB, MB, 2, sync_last_only=False,
        implementation="torch")
    # Whose host costs apply is data on the strategy: torch's reducer or realrun's wrapper.
    assert {make_strategy(n).implementation for n in ("naive", "flat", "overlap", "bucketed")} \
        == {"realrun"}
    assert make_strategy("bucketed", 8, first_bucket_mb=0.5).first_bucket_bytes == MB // 2
    assert make_strategy("ddp", 8, first_bucket_mb=3).first_bucket_bytes == 3 * MB
    assert make_strategy("naive").bucket_mb is None
    assert mb_to_bytes(1e-9) == 1  # never a 0-byte limit


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "25"])
def test_bad_bucket_mb_is_an_input_error(bad):
    with pytest.raises(InputError, match="--bucket-mb: .* is not a number > 0"):
        make_strategy("ddp", bad)
    with pytest.raises(InputError, match="--first-bucket-mb"):
        make_strategy("ddp", 25, first_bucket_mb=bad)


def test_bad_strategy_is_an_input_error():
    with pytest.raises(InputError, match="unknown strategy 'fast'; choose from naive, flat"):
        make_strategy("fast")
    with pytest.raises(InputError, match="--accum-steps must be an integer >= 1, got 0"):
        make_strategy("no_sync", accum_steps=0)
    with pytest.raises(InputError, match="--accum-steps"):
        make_strategy("naive", accum_steps=1.5)
    with pytest.raises(InputError, match="granularity must be tensor, all or bucket"):
        Strategy("x", "layer", True)
    with pytest.raises(InputError, match="needs bucket sizes > 0"):
        Strategy("x", "bucket", True, bucket_bytes=MB)


# --- plans on the toy model ----------------------------------------------------------------

def test_naive_one_collective_per_tensor_after_the_whole_backward():
    # Per-tensor, in ready order (2, 1, 0); no overlap, so every one is ready after layer 0.
    assert rows(plan(TOY, make_strategy("naive"))) == [
        ("grad2", (2,), 1.0, 0, 0, 0),
        ("grad1", (1,), 1.0, 0, 1, 0),
        ("grad0", (0,), 1.0, 0, 2, 0)]


def test_flat_one_collective_of_everything():
    assert rows(plan(TOY, make_strategy("flat"))) == [("flat", (2, 1, 0), 3.0, 0, 0, 0)]


def test_overlap_each_tensor_ready_after_its_own_layer():
    assert rows(plan(TOY, make_strategy("overlap"))) == [
        ("grad2", (2,), 1.0, 2, 0, 0),
        ("grad1", (1,), 1.0, 1, 1, 0),
        ("grad0", (0,), 1.0, 0, 2, 0)]


def test_bucketed_cap_of_two_tensors():
    # 1 MiB < 2 MiB: keep filling; 2 MiB >= 2 MiB: close. The bucket of (2, 1) is ready when
    # its last gradient is, after l1; the leftover (0,) after l0.
    assert rows(plan(TOY, make_strategy("bucketed", 2))) == [
        ("bucket0", (2, 1), 2.0, 1, 0, 0),
        ("bucket1", (0,), 1.0, 0, 1, 0)]
    # A cap bigger than the model: one bucket, ready after the whole backward.
    assert rows(plan(TOY, make_strategy("bucketed", 25))) == [("bucket0", (2, 1, 0), 3.0, 0, 0, 0)]


def test_ddp_small_first_bucket_takes_the_first_gradient_alone():
    # First limit 1 MiB: tensor 2 (1 MiB) fills it at once, so it is ready right after l2;
    # the rest go under the cap. Same grouping for cap 2 and cap 25.
    expected = [("bucket0", (2,), 1.0, 2, 0, 0), ("bucket1", (1, 0), 2.0, 0, 1, 0)]
    assert rows(plan(TOY, make_strategy("ddp", 2))) == expected
    assert rows(plan(TOY, make_strategy("ddp", 25))) == expected


def test_no_sync_syncs_only_the_last_micro_step():
    assert rows(plan(TOY, make_strategy("no_sync", 25, accum_steps=4))) == [
        ("bucket0", (2,), 1.0, 2, 0, 3),
        ("bucket1", (1, 0), 2.0, 0, 1, 3)]


def test_sync_each_syncs_every_micro_step_with_launch_indices_running_on():
    p = plan(TOY, make_strategy("sync_each", 25, accum_steps=2))
    assert rows(p) == [
        ("bucket0", (2,), 1.0, 2, 0, 0),
        ("bucket1", (1, 0), 2.0, 0, 1, 0),
        ("bucket0", (2,), 1.0, 2, 2, 1),
        ("bucket1", (1, 0), 2.0, 0, 3, 1)]
    assert p.micro_steps == 2
    assert p.buckets == [(2,), (1, 0)]
    assert [c.launch_index for c in p.per_micro_step(1)] == [2, 3]
    assert plan(TOY, make_strategy("no_sync", accum_steps=2)).per_micro_step(0) == ()


def test_measured_ready_order_regroups_but_readiness_follows_layers():
    # Measured order 0, 2, 1 (e.g. a tied weight): buckets follow it; a bucket is ready after
    # the lowest layer it holds, and buckets launch in bucket order, not in readiness order.
    measured = ModelProfile("tied", TOY.layers, ready_order=(0, 2, 1))
    assert rows(plan(measured, make_strategy("bucketed", 2))) == [
        ("bucket0", (0, 2), 2.0, 0, 0, 0),
        ("bucket1", (1,), 1.0, 1, 1, 0)]
    assert group_tensors(measured, make_strategy("flat")) == [(0, 2, 1)]
    assert group_tensors(measured, make_strategy("naive")) == [(0,), (2,), (1,)]


def test_several_tensors_per_layer_and_layers_without_gradients():
    # l0: 2 tensors (ids 0, 1); l1: none (e.g. an activation); l2: one (id 2). Ready order 2, 1, 0.
    p = ModelProfile("m", (Layer("l0", (MB, MB)), Layer("act"), Layer("l2", (MB,))))
    assert rows(plan(p, make_strategy("bucketed", 2))) == [
        ("bucket0", (2, 1), 2.0, 0, 0, 0),   # tensor 1 lives in l0: ready after l0
        ("bucket1", (0,), 1.0, 0, 1, 0)]
    assert rows(plan(p, make_strategy("overlap")))[0] == ("grad2", (2,), 1.0, 2, 0, 0)


def test_a_model_without_gradients_plans_nothing():
    p = ModelProfile("frozen", (Layer("l0", (), 1e-3, 1e-3),))
    for name in STRATEGIES + (ACCUM_BASELINE,):
        assert plan(p, make_strategy(name, accum_steps=2)).collectives == ()


def test_collective_is_frozen_data():
    c = Collective("bucket0", (1, 0), 8, 0, 0)
    with pytest.raises(AttributeError):
        c.nbytes = 9  # type: ignore[misc]


# --- properties on random profiles ---------------------------------------------------------

def random_strategy(rng: np.random.RandomState) -> Strategy:
    name = (STRATEGIES + (ACCUM_BASELINE,))[rng.randint(len(STRATEGIES) + 1)]
    bucket_mb = float(10 ** rng.uniform(-3, 2.5)) if rng.rand() < 0.8 else float(rng.randint(1, 5))
    first_mb = None if rng.rand() < 0.6 else float(10 ** rng.uniform(-3, 1.5))
    return make_strategy(name, bucket_mb, accum_steps=int(rng.randint(1, 5)),
                         first_bucket_mb=first_mb)


def synced_micro_steps(s: Strategy) -> list[int]:
    return [s.accum_steps - 1] if s.sync_last_only else list(range(s.accum_steps))


def check_bucket_rule(profile: ModelProfile, s: Strategy, groups) -> None:
    """Every proper prefix of a bucket is under its limit; every bucket but the last reaches it."""
    for i, g in enumerate(groups):
        limit = s.first_bucket_bytes if i == 0 else s.bucket_bytes
        filled = list(accumulate(profile.tensor_bytes[t] for t in g))
        assert all(f < limit for f in filled[:-1])
        if i < len(groups) - 1:
            assert filled[-1] >= limit


@pytest.mark.parametrize("seed", range(8))
def test_plan_properties_on_random_profiles(seed, random_profile):
    rng = np.random.RandomState(seed)
    for case in range(32):
        profile = random_profile(rng, measured=bool(rng.rand() < 0.3))
        s = random_strategy(rng)
        p = plan(profile, s)
        order = profile.ready_order_ids()
        where = f"seed {seed} case {case} {s}"

        assert [c.launch_index for c in p.collectives] == list(range(len(p.collectives))), where
        assert [c.micro_step for c in p.collectives] == sorted(c.micro_step for c in p.collectives)
        assert p.micro_steps == s.accum_steps
        synced = synced_micro_steps(s)
        assert {c.micro_step for c in p.collectives} == (set(synced) if order else set()), where
        groups = group_tensors(profile, s)
        assert [t for g in groups for t in g] == list(order), where  # every tensor once, in order
        for k in synced:
            ids = [t for c in p.per_micro_step(k) for t in c.tensor_ids]
            assert sorted(ids) == list(range(profile.n_tensors)), where
            assert [c.tensor_ids for c in p.per_micro_step(k)] == groups, where
        for c in p.collectives:
            assert c.nbytes == sum(profile.tensor_bytes[t] for t in c.tensor_ids)
            lowest = min(profile.tensor_layer[t] for t in c.tensor_ids)
            assert c.ready_layer == (lowest if s.overlap else 0), where
        if s.granularity == "all":
            assert len(groups) == (1 if order else 0), where
        if s.granularity == "tensor":
            assert len(groups) == profile.n_tensors
        if s.granularity == "bucket":
            check_bucket_rule(profile, s, groups)


@pytest.mark.parametrize("seed", range(4))
def test_a_cap_at_least_the_model_gives_one_bucket(seed, random_profile):
    rng = np.random.RandomState(100 + seed)
    for _ in range(25):
        profile = random_profile(rng, measured=bool(rng.rand() < 0.5))
        if not profile.n_tensors:
            continue
        total_mb = profile.grad_total_bytes / MB       # exact: bytes / 2**20 * 2**20
        for cap_mb in (total_mb, total_mb * 1.5, 1e6):
            assert len(group_tensors(profile, make_strategy("bucketed", cap_mb))) == 1
            ddp = make_strategy("ddp", cap_mb, first_bucket_mb=cap_mb)
            assert group_tensors(profile, ddp) == [profile.ready_order_ids()]
            # torch's 1 MiB first bucket can split off the first gradients, never more.
            assert len(group_tensors(profile, make_strategy("ddp", cap_mb))) <= 2


def test_a_measured_ready_order_changes_bucketing_but_keeps_every_tensor_once(random_profile):
    rng = np.random.RandomState(7)
    changed = 0
    for case in range(200):
        profile = random_profile(rng)
        if profile.n_tensors < 2:
            continue
        order = tuple(int(t) for t in rng.permutation(profile.n_tensors))
        measured = ModelProfile("m", profile.layers, profile.optimizer_s, order)
        s = make_strategy("ddp", float(rng.choice([0.5, 2, 8])))
        before, after = group_tensors(profile, s), group_tensors(measured, s)
        assert [t for g in after for t in g] == list(order), case
        check_bucket_rule(measured, s, after)
        changed += after != before
    assert changed > 100  # a shuffled order almost always regroups

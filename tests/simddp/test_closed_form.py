"""The engine against the closed-form recurrence on random models (to 1e-9), and contention
bounded between no contention and the worst slowdown."""
from __future__ import annotations

import numpy as np
import pytest

from simddp.analytic.closed_form import closed_form_step_s
from simddp.sim.engine import compute_only_s, simulate
from simddp.inputs.contention import Contention
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.planning.plans import plan
from simddp.result import COMM, COMPUTE
from simddp.planning.strategy import ACCUM_BASELINE, MB, STRATEGIES, make_strategy
from simddp.predict.resolve import resolve


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 + 1e-9 * abs(b)


def random_link(rng: np.random.RandomState) -> Link:
    alpha_s = 0.0 if rng.rand() < 0.3 else float(rng.uniform(0, 1e-3))
    return Link("random", alpha_s, float(10 ** rng.uniform(-1, 2)))


def check_lanes(r, profile, p, link, world_size) -> None:
    """Each lane does one thing at a time; comm spans are the plan's collectives in order."""
    for lane in (COMPUTE, COMM):
        spans = sorted((s.start_s, s.end_s) for s in r.spans if s.lane == lane)
        assert all(b0 <= a1 + 1e-12 for (_, b0), (a1, _) in zip(spans, spans[1:]))
    comm = [s for s in r.spans if s.lane == COMM]
    assert [s.label for s in comm] == [c.label for c in p.collectives]
    for s, c in zip(comm, p.collectives):   # never faster than the link alone
        assert s.duration_s >= link.allreduce_s(c.nbytes, world_size) * (1 - 1e-9) - 1e-12


@pytest.mark.parametrize("seed", range(8))
def test_engine_matches_closed_form_and_strategies_order(seed, random_profile):
    rng = np.random.RandomState(seed)
    for case in range(25):
        profile = random_profile(rng, measured=bool(rng.rand() < 0.3), grid=bool(rng.rand() < 0.3))
        link, world_size = random_link(rng), int(rng.randint(2, 17))
        k = int(rng.randint(1, 5))
        bucket_mb = float(10 ** rng.uniform(-3, 2.5))
        name = (STRATEGIES + (ACCUM_BASELINE,))[rng.randint(len(STRATEGIES) + 1)]
        slower, faster = ("naive", "overlap") if case % 2 else (ACCUM_BASELINE, "no_sync")
        steps = {}
        for n in dict.fromkeys((name, slower, faster)):
            p = plan(profile, make_strategy(n, bucket_mb, accum_steps=k))
            inputs = resolve(profile, link, world_size)
            r = simulate(p, inputs)
            where = f"seed {seed} case {case} {n} K={k} {bucket_mb} MB"
            assert close(r.step_s, closed_form_step_s(p, inputs)), where
            assert r.exposed_comm_s >= 0 and r.collectives == len(p.collectives)
            assert r.step_s >= compute_only_s(profile, k) * (1 - 1e-12), where
            assert close(r.exposed_comm_s, max(0.0, r.step_s - compute_only_s(profile, k)))
            check_lanes(r, profile, p, link, world_size)
            if n == "flat":                     # one collective per synced micro-step
                assert r.collectives == (k if profile.n_tensors else 0), where
            steps[n] = r.step_s
        assert steps[faster] <= steps[slower] * (1 + 1e-12), (seed, case, faster, slower)


@pytest.mark.parametrize("seed", range(6))
def test_contention_lies_between_no_contention_and_the_worst_slowdown(seed, random_profile):
    # Every rate is in [1/max slowdown, 1] and the lanes run in a fixed order, so the step is
    # bounded by the uncontended step and that step × the larger slowdown. Half the models sit
    # on a 0.5 ms / 1 MiB grid with a link of 1 MiB per ms, so lanes switch at the same instants.
    rng = np.random.RandomState(50 + seed)
    for case in range(25):
        grid = case % 2 == 0
        profile = random_profile(rng, grid=grid)
        cs, ms = (float(rng.choice([1.0, 1.5, 2.0, rng.uniform(1, 3)])) for _ in range(2))
        if grid:
            world_size, link = 2, Link("grid", float(rng.randint(0, 3)) * 0.5e-3, MB / 1e6)
        else:
            world_size, link = int(rng.randint(2, 17)), random_link(rng)
        contended = LinkFile(link, Contention(cs, ms, source="link"))
        name = STRATEGIES[rng.randint(len(STRATEGIES))]
        p = plan(profile, make_strategy(name, float(rng.choice([0.5, 2, 25])),
                                        accum_steps=int(rng.randint(1, 4))))
        plain = closed_form_step_s(p, resolve(profile, link, world_size))
        r = simulate(p, resolve(profile, contended, world_size))
        where = f"seed {seed} case {case} {name} slowdowns {cs} {ms}"
        assert plain * (1 - 1e-9) <= r.step_s <= max(cs, ms) * plain * (1 + 1e-9) + 1e-12, where
        check_lanes(r, profile, p, contended.link, world_size)
        if not p.strategy.overlap:
            assert close(r.step_s, plain), where     # the lanes never overlap: no cost at all

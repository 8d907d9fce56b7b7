"""Contention has one type (simddp/inputs/contention.py), read from the link file's and the
host's fields, and chosen once (simddp/predict/resolve.py)."""
import numpy as np
import pytest

from simddp import Layer, ModelProfile, make_strategy, plan, resolve, simulate
from simddp.inputs.contention import Contention
from simddp.inputs.contention_measurement import combine_contention, slowdowns
from simddp.errors import InputError
from simddp.inputs.host import Host
from simddp.inputs.io import host_from_json, link_file_from_json
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.inputs.resolved import Inputs
from simddp.predict.resolve import choose_contention

LINK = LinkFile(Link("l", 0.0, 1.0), Contention(1.2, 1.1, source="link"))
OWN = Host("h", contention=(1.5, 2.0), contention_spread=((1.2, 1.5), (1.8, 2.4)))


def contention_for(link_file, host=None) -> Contention:
    """What a prediction runs under, nothing chosen and no device: the measured one."""
    return choose_contention(as_link_file(link_file), host, None)


def test_the_model_s_own_contention_replaces_the_link_s():
    assert contention_for(LINK) == Contention(1.2, 1.1, source="link")
    assert LINK.contention == contention_for(LINK, Host("free"))
    c = contention_for(LINK, OWN)
    assert (c.factors, c.spread, c.source) == ((1.5, 2.0), ((1.2, 1.5), (1.8, 2.4)), "model")
    none = contention_for(Link("preset", 0.0, 1.0))
    assert (none.active, none.measured) == (False, False)


def test_ends_bracket_the_point():
    c = Contention(1.5, 2.0, spread=((1.6, 1.5), (1.8, 1.9)), source="model")
    low, high = c.ends()
    assert (low.factors, high.factors) == ((1.5, 1.5), (1.8, 2.0))
    assert Contention(1.5, 1.5).ends() is None


def test_a_scenario_s_contention_is_set_where_the_engine_reads_it():
    # the engine reads Inputs.contention: a scenario's (Inputs.scaled) or the user's (resolve)
    toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    p = plan(toy, make_strategy("overlap"))
    c = Contention(1.3, 1.4)
    for host in (OWN, None):
        point = resolve(toy, LINK, 2, host=host)
        assert point.contention == contention_for(LINK, host)
        scenario = point.scaled(contention=c)
        assert scenario.contention is c and scenario.link is point.link
        assert scenario.host is host      # the host's measurement stays as it was
        assert resolve(toy, LINK, 2, host=host, contention=c).contention is c
        bare = Inputs(toy, LINK.link, 2, c, host)
        assert simulate(p, scenario).step_s == simulate(p, bare).step_s
        assert point.scaled().contention is point.contention


def test_the_files_fields_still_load():
    link = link_file_from_json({"format": "simddp.link/1", "name": "l", "alpha_s": 1e-5,
                                "busbw_gbps": 2.0, "compute_slowdown": 1.3,
                                "comm_slowdown": 1.2})
    host = host_from_json({"format": "simddp.host/1", "name": "h", "implementations": {},
                           "contention": [1.4, 1.6],
                           "contention_spread": [[1.2, 1.3], [1.7, 1.9]]})
    assert contention_for(link).factors == (1.3, 1.2)
    assert contention_for(link, host) == Contention(1.4, 1.6, ((1.2, 1.3), (1.7, 1.9)), "model")


@pytest.mark.parametrize("bad, match", [
    (dict(compute=0.9), "two slowdowns >= 1.0"),
    (dict(comm=float("nan")), "two slowdowns >= 1.0"),
    (dict(spread=((1.0, 1.0),)), "contention_spread must be a low and a high"),
    (dict(source="guess"), "source must be one of"),
])
def test_bad_contention_is_refused_in_one_line(bad, match):
    with pytest.raises(InputError, match=match):
        Contention(**bad)


def test_factors_pair_each_repeat_s_own_times():
    # grid 3's transformer profile, rank 0, 2026-11-25 (ms): comm alone drifted 45-105 ms
    # between repeats; medians of W, T, D, Ts taken from different repeats read comm x5.3,
    # the repeats themselves x1.35-x9.1 around a median of x2.45
    reps_ms = [(48.5, 105.4, 103.7, 132.1), (55.6, 80.9, 78.2, 125.2), (50.8, 58.1, 72.1, 126.0),
               (51.3, 51.0, 117.6, 162.0), (52.0, 54.8, 90.9, 135.7), (48.1, 49.8, 66.1, 121.8),
               (55.1, 44.6, 68.3, 123.8), (46.0, 50.2, 87.6, 160.2), (44.2, 68.6, 123.4, 111.4)]
    reps = [tuple(t / 1e3 for t in r) for r in reps_ms]
    medians = dict(zip(("compute_alone_s", "comm_alone_s", "compute_together_s",
                        "comm_together_s"), np.median(np.array(reps), axis=0)))
    old = slowdowns(*medians.values())
    assert old[1] == pytest.approx(5.3, abs=0.1)
    c = combine_contention([{**medians, "repeats": 9, "repeats_s": reps}])
    assert c["comm_slowdown"] == pytest.approx(2.45, abs=0.05)
    assert c["compute_slowdown"] == pytest.approx(1.75, abs=0.05)
    (low, high) = c["spread"]      # the same repeats' p10 and p90 bracket it
    assert low[1] < c["comm_slowdown"] < high[1]

"""Contention has one type (simddp/contention.py), read from the link's and the host's fields."""
import pytest

from simddp.contention import Contention, contention_for, with_contention
from simddp.errors import InputError
from simddp.host import Host
from simddp.io import host_from_json, link_from_json
from simddp.link import Link

LINK = Link("l", 0.0, 1.0, compute_slowdown=1.2, comm_slowdown=1.1)
OWN = Host("h", contention=(1.5, 2.0), contention_spread=((1.2, 1.5), (1.8, 2.4)))


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


def test_with_contention_sets_it_where_the_engine_reads_it():
    c = Contention(1.3, 1.4)
    link, host = with_contention(LINK, OWN, c)
    assert link is LINK and host.contention == (1.3, 1.4)
    assert contention_for(link, host).factors == (1.3, 1.4)
    link, host = with_contention(LINK, None, c)
    assert host is None and (link.compute_slowdown, link.comm_slowdown) == (1.3, 1.4)
    assert with_contention(LINK, None, LINK.contention)[0] is LINK
    assert OWN.contended(LINK).comm_slowdown == 2.0   # the old name still answers


def test_the_files_fields_still_load():
    link = link_from_json({"format": "simddp.link/1", "name": "l", "alpha_s": 1e-5,
                           "busbw_gbps": 2.0, "compute_slowdown": 1.3, "comm_slowdown": 1.2})
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

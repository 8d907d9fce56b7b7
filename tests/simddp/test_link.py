"""The link law on round numbers, piecewise fits, bad links, world sizes and overrides."""
from __future__ import annotations

import argparse

import pytest

from simddp.cli.args import resolve_link
from simddp.errors import InputError
from simddp.inputs.contention import Contention
from simddp.inputs.io import link_file_from_json
from simddp.inputs.link import Link, LinkPiece
from simddp.inputs.link_file import LinkFile


def test_allreduce_law_on_round_numbers():
    link = Link("l", alpha_s=1e-3, busbw_gbps=1.0)              # 1 GB/s = 1e6 bytes per ms
    assert link.allreduce_s(10**6, 2) == pytest.approx(1e-3 + 1e-3)           # 2·1/2 = 1
    assert link.allreduce_s(10**6, 4) == pytest.approx(1e-3 + 1.5e-3)         # 2·3/4
    assert link.allreduce_s(10**6, 16) == pytest.approx(1e-3 + 1.875e-3)      # 2·15/16
    assert link.allreduce_s(0, 8) == 1e-3                                    # α alone
    assert Link("eth", alpha_s=50e-6, busbw_gbps=1.0).allreduce_s(1_000_000, 2) == 0.00105


def test_piecewise_link_picks_the_first_piece_that_holds_the_size():
    link = Link("pw", alpha_s=9.0, busbw_gbps=9.0, pieces=(   # base law unused with pieces
        LinkPiece(10**6, 1e-3, 1.0), {"up_to_bytes": 10**7, "alpha_s": 2e-3, "busbw_gbps": 2.0},
        LinkPiece(None, 0.0, 4.0)))
    assert isinstance(link.pieces[1], LinkPiece)
    assert link.allreduce_s(10**6, 2) == pytest.approx(1e-3 + 1e-3)            # on the bound
    assert link.allreduce_s(10**6 + 2, 2) == pytest.approx(2e-3 + (10**6 + 2) / 2e9)
    assert link.allreduce_s(10**7, 2) == pytest.approx(2e-3 + 5e-3)
    assert link.allreduce_s(10**7 + 1, 2) == pytest.approx((10**7 + 1) / 4e9)
    assert link.allreduce_s(1, 2) == pytest.approx(1e-3 + 1e-9)


@pytest.mark.parametrize("kwargs, match", [
    (dict(alpha_s=-1e-6), "alpha_s must be a finite number >= 0"),
    (dict(alpha_s=float("nan")), "alpha_s"),
    (dict(busbw_gbps=0.0), "busbw_gbps must be a finite number > 0"),
    (dict(busbw_gbps=float("inf")), "busbw_gbps"),
    (dict(world_size=1), "world_size must be an integer >= 2"),
    (dict(world_size=2.0), "world_size must be an integer >= 2"),
    (dict(pieces=(LinkPiece(10, 0.0, 1.0),)), "end with up_to_bytes null"),
    (dict(pieces=(LinkPiece(None, 0.0, 1.0), LinkPiece(None, 0.0, 1.0))), "up_to_bytes null"),
    (dict(pieces=(LinkPiece(20, 0.0, 1.0), LinkPiece(10, 0.0, 1.0), LinkPiece(None, 0.0, 1.0))),
     "increasing up_to_bytes"),
    (dict(pieces=(LinkPiece(None, -1.0, 1.0),)), "pieces.alpha_s"),
    (dict(pieces=(LinkPiece(None, 0.0, 0.0),)), "pieces.busbw_gbps"),
])
def test_bad_link_is_a_one_line_input_error_naming_it(kwargs, match):
    fields = dict(name="eth", alpha_s=0.0, busbw_gbps=1.0) | kwargs
    with pytest.raises(InputError, match=match) as e:
        Link(**fields)
    assert "'eth'" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("section, match", [
    ({"compute": 0.5, "comm": 1.0}, "contention must be two slowdowns >= 1.0 \\(compute, comm\\), "
                                    "got \\(0.5, 1.0\\)"),
    ({"compute": 1.0, "comm": float("nan")}, "contention must be two slowdowns >= 1.0"),
])
def test_bad_contention_beside_a_link_is_a_one_line_input_error_naming_its_file(section, match):
    # the slowdowns live beside the link now, in its file's contention section
    doc = {"format": "simddp.link/2", "name": "eth", "alpha_s": 0.0, "busbw_gbps": 1.0,
           "contention": section}
    with pytest.raises(InputError, match=match) as e:
        link_file_from_json(doc, "eth.json")
    assert str(e.value).startswith("eth.json: ") and "\n" not in str(e.value)


def test_for_world_checks_the_calibrated_size():
    anywhere = Link("preset", 0.0, 1.0)
    assert anywhere.for_world(7) is anywhere
    measured = Link("lab", 1e-3, 1.0, world_size=8)
    assert measured.for_world(8) is measured
    with pytest.raises(InputError, match="calibrated at world size 8, not 4; .*--rescale-link"):
        measured.for_world(4)
    # Rescaled by the ring law: busbw and α kept, the 2(p−1)/p factor follows p.
    rescaled = measured.for_world(4, rescale=True)
    assert rescaled.allreduce_s(10**6, 4) == pytest.approx(1e-3 + 1.5e-3)
    for bad in (1, 0, 2.5, "4"):
        with pytest.raises(InputError, match="--world-size must be an integer >= 2"):
            anywhere.for_world(bad)


def test_with_overrides_replaces_alpha_and_busbw_and_drops_pieces():
    link = Link("eth", 1e-3, 1.0, world_size=4, pieces=(LinkPiece(None, 5e-3, 3.0),))
    assert link.with_overrides() is link
    faster = link.with_overrides(alpha_us=50)
    assert (faster.name, faster.busbw_gbps, faster.pieces) == ("eth*", 1.0, ())
    assert faster.alpha_s == pytest.approx(50e-6, rel=1e-12)
    assert faster.world_size == 4
    # the contention measured beside the link is kept through the overrides (--alpha-us)
    measured = LinkFile(link, Contention(1.2, 1.0, source="link"))
    overridden = resolve_link(argparse.Namespace(link=measured, alpha_us=50, busbw_gbps=None,
                                                 world_size=4, rescale_link=False))
    assert overridden.link == faster and overridden.contention == measured.contention
    wider = link.with_overrides(busbw_gbps=10.0)
    assert (wider.alpha_s, wider.busbw_gbps) == (1e-3, 10.0)
    assert wider.allreduce_s(10**7, 2) == pytest.approx(1e-3 + 1e-3)
    with pytest.raises(InputError, match="busbw_gbps"):
        link.with_overrides(busbw_gbps=0.0)



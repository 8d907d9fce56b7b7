"""JSON files: round trips through real files, one-line errors naming the file, atomic writes."""
from __future__ import annotations

import json
import os

import pytest

from simddp.inputs import io
from simddp.errors import InputError
from simddp.inputs.io import (link_file_from_json, link_from_json, link_to_json, load_link,
                              load_link_file, load_profile, profile_to_json, read_json,
                              save_json, write_atomic)
from simddp.result import load_results, results_to_json
from simddp.inputs.contention import Contention
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.link import KindFit, Link, LinkPiece
from simddp.inputs.link_file import Levels, LinkFile
from simddp.inputs.profile import Layer, ModelProfile
from simddp.result import Result, Span

PROFILE = ModelProfile("toy", (
    Layer("embed", (4000, 8), 1e-3, 2e-3, ("embed.weight", "embed.bias")),
    Layer("attn", (), 3e-3, 6e-3),
    Layer("head", (40,), 0.0, 0.5e-3)), optimizer_s=4e-3)
LINK = Link("gloo-p2", alpha_s=6.1e-05, busbw_gbps=2.3, world_size=2, backend="gloo",
            pieces=(LinkPiece(65536, 4e-05, 1.1), LinkPiece(None, 9e-05, 2.4)),
            source="calibrate, R2=0.998")
# the link and calibrate's contention beside it, as its file holds them
LINK_FILE = LinkFile(LINK, Contention(1.3, 1.2, source="link"))
# the same link file as the first format wrote it: one flat object
LINK_1_JSON = {"format": "simddp.link/1", "name": "gloo-p2", "alpha_s": 6.1e-05,
               "busbw_gbps": 2.3, "world_size": 2, "backend": "gloo",
               "pieces": [{"up_to_bytes": 65536, "alpha_s": 4e-05, "busbw_gbps": 1.1},
                          {"up_to_bytes": None, "alpha_s": 9e-05, "busbw_gbps": 2.4}],
               "compute_slowdown": 1.3, "comm_slowdown": 1.2, "source": "calibrate, R2=0.998",
               "blocking_alpha_s": None, "time_spread": None}
GLOO_HOST = GlooHost(blocking_alpha_s=2e-3, kind_blocking_alpha_s={"reduce_scatter": 1.5e-3},
                     burst_bytes=250_000.0, idle_wake_s=6e-4, blocking_refill_s=1e-3)
RESULTS = [
    Result("toy", "gloo-p2", "ddp", 25.0, 2, 0.071, 0.009, 21, accum_steps=1, compute_s=0.062,
           spans=(Span("compute", "forward", 0.0, 0.019, "forward"),
                  Span("comm", "bucket0", 0.02, 0.03, "all-reduce"))),
    Result("toy", "gloo-p2", "naive", None, 2, 0.08, 0.018, 3, source="measured",
           step_p5_s=0.079, step_p95_s=0.083, samples=50)]


# --- round trips ---------------------------------------------------------------------------

@pytest.mark.parametrize("profile", [
    PROFILE, ModelProfile(PROFILE.name, PROFILE.layers, PROFILE.optimizer_s, (0, 2, 1))])
def test_profile_round_trip(tmp_path, profile):
    path = tmp_path / "profile.json"
    save_json(path, profile_to_json(profile))
    assert load_profile(path) == profile
    data = json.loads(path.read_text())
    assert data["format"] == "simddp.profile/1"
    assert data["ready_order"] == (None if profile.ready_order is None else [0, 2, 1])
    assert data["layers"][0] == {"name": "embed", "grad_bytes": [4000, 8], "forward_s": 1e-3,
                                 "backward_s": 2e-3, "grad_names": ["embed.weight", "embed.bias"]}


def test_profile_optional_fields_default(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "simddp.profile/1", "name": "m",
                                "layers": [{"name": "l0", "grad_bytes": [8]}]}))
    assert load_profile(path) == ModelProfile("m", (Layer("l0", (8,)),))


@pytest.mark.parametrize("link_file", [
    LINK_FILE, LinkFile(Link("preset", 0.0, 1.0)),
    LinkFile(Link("kinds", 1e-5, 3.0, time_spread=(0.9, 1.4),
                  kind_fits={"all_gather": KindFit(2e-5, 2.5)}), host=GLOO_HOST),
    LinkFile(LINK, LINK_FILE.contention, GLOO_HOST),
    LinkFile(Link("flat", 2e-5, 1.0, world_size=4), LINK_FILE.contention, GlooHost(),
             Levels(2, intra=LinkFile(Link("in", 1e-5, 20.0, world_size=2)),
                    inter=LinkFile(Link("across", 3e-5, 0.8), Contention(1.1, 1.4,
                                                                          source="link"),
                                   GlooHost(blocking_alpha_s=5e-5))))],
    ids=["contention", "preset", "gloo_host", "both", "levels"])
def test_link_round_trip(tmp_path, link_file):
    path = tmp_path / "link.json"
    save_json(path, link_to_json(link_file))
    assert load_link_file(path) == link_file
    assert load_link(path) == link_file.link
    link = link_file.link
    assert load_link(path).allreduce_s(10**6, 2) == link.allreduce_s(10**6, 2)
    data = json.loads(path.read_text())
    assert data["format"] == "simddp.link/2"
    # each section only where it was measured
    assert ("contention" in data) is (link_file.contention is not None)
    assert ("gloo_host" in data) is (link_file.host is not None)
    assert ("levels" in data) is (link_file.levels is not None)


def test_link_file_sections():
    data = link_to_json(LinkFile(LINK, LINK_FILE.contention, GLOO_HOST))
    assert data["contention"] == {"compute": 1.3, "comm": 1.2}
    assert data["gloo_host"] == {"blocking_alpha_s": 2e-3,
                                 "kind_blocking_alpha_s": {"reduce_scatter": 1.5e-3},
                                 "burst_bytes": 250_000.0, "idle_wake_s": 6e-4,
                                 "blocking_refill_s": 1e-3}
    assert not {"compute_slowdown", "comm_slowdown", "blocking_alpha_s"} & set(data)
    # a bare link is a link file with nothing beside it; levels may be given beside it
    assert link_to_json(LINK) == link_to_json(LinkFile(LINK))
    levels = Levels(2, intra=Link("in", 1e-5, 20.0), inter=Link("across", 3e-5, 0.8))
    assert link_file_from_json(link_to_json(LINK, levels=levels)) == LinkFile(LINK,
                                                                              levels=levels)
    # contention (1.0, 1.0) is none: stored as None
    assert link_file_from_json(dict(link_to_json(LINK), contention={"compute": 1.0,
                                                                    "comm": 1.0})) == \
        LinkFile(LINK)


def test_a_link_1_file_loads_into_the_sections(tmp_path):
    path = tmp_path / "link.json"
    path.write_text(json.dumps(LINK_1_JSON))
    # measured contention comes with a (possibly empty) gloo_host
    assert load_link_file(path) == LinkFile(LINK, LINK_FILE.contention, GlooHost())
    assert load_link(path) == LINK == link_from_json(LINK_1_JSON)
    assert load_link(path).allreduce_s(10**6, 2) == LINK.allreduce_s(10**6, 2)
    # every rig field into gloo_host, the kinds' blocking α too
    rig = dict(LINK_1_JSON, blocking_alpha_s=2e-3, burst_bytes=250_000.0, idle_wake_s=6e-4,
               blocking_refill_s=1e-3, kind_fits={"reduce_scatter": {
                   "alpha_s": 1e-5, "busbw_gbps": 2.0, "blocking_alpha_s": 1.5e-3}})
    assert link_file_from_json(rig) == LinkFile(
        Link(**{**LINK.__dict__, "kind_fits": {"reduce_scatter": KindFit(1e-5, 2.0)}}),
        LINK_FILE.contention, GLOO_HOST)
    # a /1 file with neither: the link alone
    bare = {k: v for k, v in LINK_1_JSON.items() if k not in ("compute_slowdown",
                                                              "comm_slowdown")}
    assert link_file_from_json(bare) == LinkFile(LINK)
    assert link_file_from_json(dict(bare, compute_slowdown=1.0, comm_slowdown=1.0)) == \
        LinkFile(LINK)
    # levels: each level's own /1 body into its sections
    intra = {"name": "in", "alpha_s": 1e-5, "busbw_gbps": 20.0, "world_size": 2}
    inter = {"name": "across", "alpha_s": 3e-5, "busbw_gbps": 0.8, "compute_slowdown": 1.1,
             "comm_slowdown": 1.4, "blocking_alpha_s": 5e-5}
    lv = link_file_from_json(dict(bare, levels={"gpus_per_node": 2, "intra": intra,
                                                "inter": inter})).levels
    assert lv == Levels(2, intra=LinkFile(Link("in", 1e-5, 20.0, world_size=2)),
                        inter=LinkFile(Link("across", 3e-5, 0.8),
                                       Contention(1.1, 1.4, source="link"),
                                       GlooHost(blocking_alpha_s=5e-5)))


def test_results_round_trip_with_spans_and_extra_fields(tmp_path):
    path = tmp_path / "out" / "results.json"          # missing folders are created
    save_json(path, results_to_json(RESULTS, sweep={"world_size": 2}))
    assert load_results(path) == RESULTS
    data = json.loads(path.read_text())
    assert data["format"] == "simddp.results/1" and data["sweep"] == {"world_size": 2}
    assert data["results"][0]["spans"][1] == {"lane": "comm", "label": "bucket0",
                                              "start_s": 0.02, "end_s": 0.03,
                                              "kind": "all-reduce"}
    assert data["results"][1]["bucket_mb"] is None and data["results"][1]["spans"] == []


def test_non_finite_floats_are_written_as_null(tmp_path):
    r = Result("m", "l", "naive", None, 2, 0.1, 0.0, 1, step_p95_s=float("nan"))
    path = tmp_path / "r.json"
    save_json(path, results_to_json([r]))
    assert "NaN" not in path.read_text()
    assert load_results(path)[0].step_p95_s is None


# --- bad files: one-line InputError naming the file ----------------------------------------

PROFILE_JSON = profile_to_json(PROFILE)
LINK_JSON = link_to_json(LINK_FILE)


def with_layer(**changes):
    layers = [dict(PROFILE_JSON["layers"][0], **changes)] + PROFILE_JSON["layers"][1:]
    return dict(PROFILE_JSON, layers=layers)


@pytest.mark.parametrize("loader, text, match", [
    (load_profile, '{"format": "simddp.profile/1", "name": ', "not valid JSON \\(line 1"),
    (load_profile, "", "not valid JSON"),
    (load_profile, "[1, 2]", 'expected a JSON object with "format": "simddp.profile/1"'),
    (load_profile, json.dumps(LINK_1_JSON), "format is 'simddp.link/1', expected 'simddp.profile/1'"),
    (load_profile, json.dumps(LINK_JSON), "format is 'simddp.link/2', expected 'simddp.profile/1'"),
    (load_link, json.dumps(PROFILE_JSON), "format is 'simddp.profile/1', expected 'simddp.link/2'"),
    (load_results, json.dumps({"results": []}), "format is None, expected 'simddp.results/1'"),
    (load_profile, json.dumps({k: v for k, v in PROFILE_JSON.items() if k != "layers"}),
     "missing field 'layers'"),
    (load_profile, json.dumps(with_layer(forward_s=None)), "forward_s must be a finite number"),
    (load_profile, json.dumps(with_layer(backward_s=-0.001)),
     "layer 'embed': backward_s must be a finite number >= 0 seconds, got -0.001"),
    (load_profile, json.dumps(dict(PROFILE_JSON, optimizer_s=-1)), "optimizer_s must be"),
    (load_profile, json.dumps(with_layer(grad_bytes=[4000.5, 8])), "grad_bytes must be integers"),
    (load_profile, json.dumps(with_layer(weight_bytes=[4])), "not a valid file \\(.*weight_bytes"),
    (load_profile, json.dumps(dict(PROFILE_JSON, ready_order=[0, 0, 1])),
     "ready_order must be a permutation"),
    (load_profile, json.dumps(dict(PROFILE_JSON, layers=[])), "has no layers"),
    (load_link, json.dumps({k: v for k, v in LINK_JSON.items() if k != "busbw_gbps"}),
     "not a valid file \\(.*busbw_gbps"),
    (load_link, json.dumps(dict(LINK_JSON, alpha_s=-1e-6)), "alpha_s must be a finite number >= 0"),
    (load_link, json.dumps(dict(LINK_JSON, bandwidth=1, alpha_us=3)),
     "unknown link field\\(s\\) alpha_us, bandwidth"),
    (load_link, json.dumps(dict(LINK_JSON, pieces=[{"up_to_bytes": None, "alpha": 0}])),
     "not a valid file"),
    (load_link, json.dumps(dict(LINK_JSON, pieces=[
        {"up_to_bytes": 10, "alpha_s": 0, "busbw_gbps": 1}])), "end with up_to_bytes null"),
    (load_link, json.dumps(dict(LINK_1_JSON, comm_slowdown=0.5)), "comm_slowdown must be >= 1.0"),
    (load_link, json.dumps(dict(LINK_JSON, contention={"compute": 1.3, "comm": 0.5})),
     "contention must be two slowdowns >= 1.0"),
    (load_link, json.dumps(dict(LINK_JSON, compute_slowdown=1.3)),
     "unknown link field\\(s\\) compute_slowdown"),
    (load_link, json.dumps(dict(LINK_JSON, gloo_host={"idle_wake_s": -1})),
     "gloo_host: idle_wake_s must be a finite number >= 0"),
    (load_results, json.dumps({"format": "simddp.results/1"}), "missing field 'results'"),
    (load_results, json.dumps({"format": "simddp.results/1", "results": [{"model": "m"}]}),
     "not a valid file"),
])
def test_bad_file_is_a_one_line_input_error_naming_it(tmp_path, loader, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as e:
        loader(path)
    message = str(e.value)
    assert message.startswith(f"{path}: ") and "\n" not in message


def test_missing_unreadable_and_binary_files(tmp_path):
    for path, match in [(tmp_path / "nope.json", "no such file"),
                        (tmp_path, "folder"),                            # a directory
                        (tmp_path / "bin.json", "UTF-8")]:
        if path.name == "bin.json":
            path.write_bytes(b"\xff\xfe\x00garbage")
        with pytest.raises(InputError, match=match) as e:
            read_json(path)
        assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)


# --- atomic writes -------------------------------------------------------------------------

def test_write_atomic_leaves_only_the_file(tmp_path):
    path = tmp_path / "a.txt"
    write_atomic(path, "one")
    write_atomic(path, b"two")                       # replaces, bytes too
    assert path.read_text() == "two"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_save_json_to_an_unwritable_path_is_an_input_error_and_writes_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for path in [blocker / "out.json",               # its folder is a file
                 tmp_path / "folder"]:               # the path is a folder
        if path.name == "folder":
            path.mkdir()
        with pytest.raises(InputError, match="cannot write") as e:
            save_json(path, {"format": "x"})
        assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["file", "folder"]
    assert blocker.read_text() == "x" and os.listdir(tmp_path / "folder") == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_save_json_into_a_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(InputError, match="cannot write"):
            save_json(folder / "out.json", {})
    finally:
        folder.chmod(0o700)
    assert os.listdir(folder) == []


def test_a_failed_write_keeps_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    save_json(path, {"old": True})

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(io.os, "replace", full_disk)
    with pytest.raises(InputError, match=r"results.json: cannot write \(No space left on device"):
        save_json(path, {"new": True})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"old": True}
    assert os.listdir(tmp_path) == ["results.json"]


def test_a_profile_whose_layers_ran_in_another_order_than_their_tensors_are_numbered():
    """A measured profile lists layers as they ran (SwiGLU: w1, w3, w2) and numbers tensors as
    parameters() lists them (w1, w2, w3): grad_ids carry the numbering through the file."""
    profile = ModelProfile("swiglu", (Layer("w1", (8,), 1e-3, 1e-3, ("w1.weight",), (0,)),
                                      Layer("w3", (16,), 1e-3, 1e-3, ("w3.weight",), (2,)),
                                      Layer("w2", (24,), 1e-3, 1e-3, ("w2.weight",), (1,))),
                           ready_order=(1, 2, 0))
    assert profile.tensor_bytes == (8, 24, 16) and profile.tensor_layer == (0, 2, 1)
    assert profile.tensor_names == ("w1.weight", "w2.weight", "w3.weight")
    assert io.profile_from_json(json.loads(json.dumps(profile_to_json(profile)))) == profile
    for bad in (((0,), ()), ((0,), (0,)), ((0,), (5,))):
        with pytest.raises(InputError, match="grad_ids must be given for every layer"):
            ModelProfile("m", (Layer("a", (8,), grad_ids=bad[0]), Layer("b", (8,), grad_ids=bad[1])))

"""realrun's per-layer profiler: a valid simddp ModelProfile of any module, read back by simddp.

The presets, a Hugging Face GPT-2 (tied embedding and LM head) and a CNN (BatchNorm buffers,
a frozen stem) all go through the same ``profile_module``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from realrun.cli import main as realrun_main
from realrun.layer_timing import attribute, profile_workload
from realrun.tensors import trainable_parameters
from realrun.workload import Workload
from simddp.inputs.io import load_profile
from simddp.presets.models import parse_model

TINY = parse_model("transformer-small").shrunk(layers=2, d_model=32, d_ff=64, heads=4, vocab=50)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def profile_model(spec, batch: int, seq: int, **kwargs):
    torch.set_num_threads(1)
    return profile_workload(Workload.preset(spec, batch, seq), **kwargs)


def test_attribute_gives_gaps_to_the_next_layer_and_the_tail_to_the_last():
    # ends at 1, 3 and 4 s (layer 2 finished first); the pass ran from 0 to 6 s
    assert attribute([3.0, 4.0, 1.0, None], start_s=0.0, stop_s=6.0) == [2.0, 3.0, 1.0, 0.0]
    assert attribute([None], 0.0, 1.0) == [0.0]


@pytest.fixture(scope="module")
def tiny_profile():
    return profile_model(TINY, batch=2, seq=4, repeats=3, warmup=1)


def test_profile_layers_are_the_parameter_owners_in_execution_order(tiny_profile):
    profile, measured = tiny_profile
    assert profile.name == TINY.name
    owners = [name for name, kind, _ in TINY.ops() if kind != "attn"]  # attn owns nothing
    ran = [layer.name for layer in profile.layers]
    assert sorted(ran) == sorted(owners)
    # execution order: SwiGLU computes w1(h) and w3(h) before w2 of their product
    b = "blocks.1."
    assert ran.index(b + "w1") < ran.index(b + "w3") < ran.index(b + "w2")
    assert profile.tensor_names == tuple(n for n, _ in TINY.parameters())  # DDP's numbering
    sizes = [4 * _numel(shape) for _, shape in TINY.parameters()]
    assert list(profile.tensor_bytes) == sizes
    assert all(layer.forward_s > 0 and layer.backward_s >= 0 for layer in profile.layers)
    assert profile.optimizer_s > 0
    assert measured["repeats"] == 3 and measured["ready_order_stable"]
    assert measured["precision"] == "fp32" and measured["clock"] == "perf_counter"


def test_ready_order_is_observed(tiny_profile):
    profile, _ = tiny_profile
    order = list(profile.ready_order)
    ids = {n: i for i, (n, _) in enumerate(TINY.parameters())}
    assert order[:2] == [ids["head.weight"], ids["norm.weight"]]
    assert order[-1] == ids["embed.weight"]
    # SwiGLU: w2 first, then w3 (computed after silu(w1 x) in forward), then w1.
    pos = {tid: k for k, tid in enumerate(order)}
    b = "blocks.1."
    assert pos[ids[b + "w2.weight"]] < pos[ids[b + "w3.weight"]] < pos[ids[b + "w1.weight"]]


def test_mlp_ready_order_is_reverse():
    profile, _ = profile_model(parse_model("mlp-3x8"), batch=1, seq=2, repeats=1, warmup=0)
    assert profile.ready_order == (2, 1, 0)


@pytest.mark.parametrize("example, tied, frozen", [("gpt2_tiny.py", True, False),
                                                    ("cnn.py", False, True)])
def test_a_third_party_model_profiles_as_realrun_ddp_numbers_it(example, tied, frozen):
    """Tensors are exactly the model's unique trainable parameters (count, names, bytes), in
    parameters() order; the ready order is a permutation of them."""
    if example.startswith("gpt2"):
        pytest.importorskip("transformers")
    workload = Workload.from_target(f"{EXAMPLES / example}:build")
    profile, measured = profile_workload(workload, repeats=2, warmup=1)
    model, _, _ = workload.build(0, 0, "cpu")
    params = trainable_parameters(model)
    assert profile.tensor_names == tuple(n for n, _ in params)
    assert list(profile.tensor_bytes) == [p.numel() * p.element_size() for _, p in params]
    assert sorted(profile.ready_order) == list(range(len(params)))
    assert measured["unused_parameters"] == [] and measured["workload"]["module"]
    names = {n for n, _ in params}
    if tied:   # the LM head's weight is the embedding's: all-reduced once, ready last
        assert model.lm_head.weight is model.transformer.wte.weight
        assert "lm_head.weight" not in names
        assert profile.ready_order[-1] == [n for n, _ in params].index("transformer.wte.weight")
    if frozen:  # the stem gets no gradient; BatchNorm's running stats are buffers
        assert not any(n.startswith("stem.") for n in names)
        assert "features.0.1.running_mean" in dict(model.named_buffers())
        assert "features.0.1.weight" in names


def test_bf16_profile_keeps_fp32_gradients():
    profile, measured = profile_model(parse_model("mlp-2x16"), batch=1, seq=4, repeats=1,
                                      warmup=0, precision="bf16")
    assert measured["precision"] == "bf16" and profile.tensor_bytes == (16 * 16 * 4,) * 2


@pytest.mark.slow
def test_profile_cli_on_two_ranks_writes_what_a_plain_sweep_charges(tmp_path, capsys):
    """realrun profile runs on 2 ranks at once by default and stores the DDP implementations'
    host costs and the compute spread with the profile; a plain sweep of it charges them."""
    path = tmp_path / "profile.json"
    code = realrun_main(["profile", "--model", "ffn-2x8x16", "--batch", "1", "--seq", "2",
                         "--repeats", "2", "--warmup", "1", "--optimizer", "adam",
                         "--out", str(path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "blocks.1.down" in out.split()   # a row per layer; the ranks: world_size below
    profile = load_profile(path)
    assert profile.name == "ffn-2x8x16"
    doc = json.loads(path.read_text())
    assert doc["measured"]["optimizer"] == "adam" and doc["measured"]["world_size"] == 2
    low, high = doc["measured"]["compute_spread"]
    assert 0 < low <= 1 <= high
    chunks = doc["measured"]["plain_chunk_ms"]  # the plain steps' 4 stretches (drift_line)
    assert len(chunks) == 4 and all(ms > 0 for ms in chunks)
    assert set(doc["host_costs"]["implementations"]) == {"realrun", "torch"}
    # what shared the ranks' CPUs, for sweep's caution (simddp/rig/cpu_share.py)
    measured = doc["measured"]
    assert (measured["backend"], measured["ranks_on_host"]) == ("gloo", 2)
    assert measured["cpus"] == len(os.sched_getaffinity(0))
    # the compute of a step that communicates: the probe's compute alone over the layers'
    from realrun.launch.contention_timing import compute_after_comm
    after = doc["host_costs"]["compute_after_comm"]
    assert after == measured["compute_after_comm"] >= 1.0
    assert after == compute_after_comm(measured["contention"]["per_rank"],
                                       profile.forward_s + profile.backward_s)

    from simddp.cli.main import main as simddp_main
    assert simddp_main(["sweep", "--model", str(path), "--format", "json"]) == 0
    sweep = json.loads(capsys.readouterr().out)
    assert sweep["setup"]["model"] == "ffn-2x8x16"
    assert sweep["setup"]["host_costs"] == "ffn-2x8x16 on 2 ranks"
    starved = measured["cpus"] < 2 * (1 + 3)   # 2 ranks x (1 thread + Gloo's 3)
    assert (sweep["setup"]["cpu_note"] is not None) == starved


@pytest.mark.parametrize("argv, message", [
    (["--model", "mlp-2x8", "--heads", "2"], "--heads does not apply to mlp-2x8"),
    (["--model", "mlp-2x8", "--repeats", "0"], "--repeats must be an integer >= 1, got 0"),
    (["--model", "profile.json"], "a profile file has no torch module to run"),
    (["--model", "cnn-3"], "unknown model 'cnn-3'"),
    (["--model", "transformer-small", "--heads", "5"], "not divisible by heads 5"),
])
def test_profile_bad_args_exit_2_with_one_line(argv, message, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert realrun_main(["profile", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def test_on_cuda_the_hooks_record_events_and_only_the_step_synchronizes(monkeypatch):
    """No GPU here: fake events stand in for torch.cuda.Event. A step synchronizes twice
    (before its first mark and after its last), never inside a hook, and a mark's time is
    the elapsed time between recorded events."""
    from realrun.layer_timing import Clock
    calls = {"sync": 0}

    class FakeEvent:
        now_s = 0.0

        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing
            self.at_s = None

        def record(self) -> None:
            FakeEvent.now_s += 0.002
            self.at_s = FakeEvent.now_s

        def elapsed_time(self, other) -> float:   # milliseconds, as CUDA reports them
            return (other.at_s - self.at_s) * 1e3

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize",
                        lambda device=None: calls.__setitem__("sync", calls["sync"] + 1))
    clock = Clock(torch.device("cuda", 0))
    clock.begin()
    marks = [clock.mark() for _ in range(3)]   # what three hooks do
    assert calls["sync"] == 1
    clock.end()
    assert calls["sync"] == 2
    assert [clock.seconds(m) for m in marks] == pytest.approx([0.002, 0.004, 0.006])

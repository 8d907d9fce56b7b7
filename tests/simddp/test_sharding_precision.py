"""fsdp and zero2 under FSDP2's mixed precision, MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32), as GPU jobs run them (issue 52 item 5): the bytes each collective moves,
the cast before each all-gather, and a hand-computed timeline.

The toy of test_engine.py and test_sharding.py: 3 layers l0, l1, l2, each 1 ms forward and
2 ms backward, one 1 MiB gradient each, 2 ranks, a link where a 1 MiB all-reduce takes 1 ms,
so a 1 MiB reduce-scatter or all-gather 0.5 ms. Under the policy an all-gather sends the unit
in bf16 (0.5 MiB: 0.25 ms) after casting this rank's fp32 shard (0.5 MiB read, 0.25 MiB
written: 0.75 MiB). At CAST_GBPS that cast takes 0.125 ms, so each all-gather holds the comm
lane 0.375 ms; a reduce-scatter stays fp32, 0.5 ms.
"""
from __future__ import annotations

import ast
import json

import pytest

from simddp.cli.main import main
from simddp.analytic.closed_form import closed_form_step_s
from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.io import profile_to_json, save_json
from simddp.cost.factors import ALL_GATHER, REDUCE_SCATTER
from simddp.planning.plans import plan
from simddp.presets import build_profile, get_device, parse_model
from simddp.planning.sharding import cast_rate, cast_seconds
from simddp.planning.strategy import MB, Strategy, make_strategy, with_precision
from simddp.predict.resolve import resolve
from tests.simddp.test_engine import TOY, step_ms, timeline, unit_link

CAST_GBPS = 0.75 * MB / 0.125e-3 / 1e9      # 6.291456 GB/s: 0.75 MiB in 0.125 ms


def run(name: str, **kw):
    s = make_strategy(name, param_dtype="bf16", cast_gbps=CAST_GBPS, **kw)
    return simulate(plan(TOY, s), resolve(TOY, unit_link(), 2))


def test_all_gathers_halve_and_reduce_scatters_keep_their_bytes():
    profile = build_profile(parse_model("transformer-small"))
    for name in ("fsdp", "zero2"):
        full = plan(profile, make_strategy(name)).collectives
        half = plan(profile, make_strategy(name, param_dtype="bf16")).collectives
        assert [c.nbytes for c in half] == [c.nbytes for c in full]   # fp32 bytes of the unit
        for f, h in zip(full, half):
            assert h.kind == f.kind
            assert sum(h.calls) == (f.nbytes // 2 if f.kind == ALL_GATHER else f.nbytes)
        gathered = sum(sum(c.calls) for c in half if c.kind == ALL_GATHER)
        assert gathered * 2 == sum(c.nbytes for c in full if c.kind == ALL_GATHER)
        assert sum(sum(c.calls) for c in half if c.kind == REDUCE_SCATTER) == \
            sum(c.nbytes for c in full if c.kind == REDUCE_SCATTER)


def test_the_cast_is_the_shard_read_in_fp32_and_written_in_bf16():
    s = make_strategy("fsdp", param_dtype="bf16", cast_gbps=CAST_GBPS)
    casts_ms = [round(t * 1e3, 9) for t in cast_seconds(plan(TOY, s), 2)]
    # AG l0, l1, l2, re-gather l2, l1, RS l2, re-gather l0, RS l1, RS l0
    assert casts_ms == [0.125] * 5 + [0.0, 0.125, 0.0, 0.0]
    # 4 ranks: a quarter of the unit each, half the cast
    assert round(cast_seconds(plan(TOY, s), 4)[0] * 1e3, 9) == 0.0625
    # no rate: the casts are not timed; no policy: nothing to cast
    assert cast_seconds(plan(TOY, make_strategy("fsdp", param_dtype="bf16")), 2) == [0.0] * 9
    assert cast_seconds(plan(TOY, make_strategy("fsdp", cast_gbps=1.0)), 2) == [0.0] * 9


FSDP_BF16_TIMELINE = [
    # t=0 reaching l0 issues AG(l0) and, one unit ahead, AG(l1): cast + bf16 call, 0.375 each
    ("compute", "l0 fwd", 0.375, 1.375),
    ("compute", "l1 fwd", 1.375, 2.375),   # AG(l1) ran 0.375–0.75
    ("compute", "l2 fwd", 2.375, 3.375),   # AG(l2) issued at 1.375 on reaching l1
    ("compute", "l2 bwd", 3.75, 5.75),     # waits for its re-gather, 3.375–3.75
    ("compute", "l1 bwd", 5.75, 7.75),     # its re-gather prefetched: 3.75–4.125
    ("compute", "l0 bwd", 7.75, 9.75),     # re-gather issued at 5.75, after RS(l2): 6.625
    ("comm", "l0 all-gather", 0.0, 0.375), ("comm", "l1 all-gather", 0.375, 0.75),
    ("comm", "l2 all-gather", 1.375, 1.75),
    ("comm", "l2 re-gather", 3.375, 3.75), ("comm", "l1 re-gather", 3.75, 4.125),
    ("comm", "l2 reduce-scatter", 5.75, 6.25), ("comm", "l0 re-gather", 6.25, 6.625),
    ("comm", "l1 reduce-scatter", 7.75, 8.25), ("comm", "l0 reduce-scatter", 9.75, 10.25)]


def test_fsdp_bf16_timeline_by_hand():
    # fp32 (test_sharding.py's FSDP_TIMELINE) ends at 10.5 ms: each all-gather here is 0.125 ms
    # shorter (0.25 wire + 0.125 cast against 0.5), which moves l0's forward, and so the rest
    # of the step, 0.125 earlier; one more in backward (l2 waits for its re-gather).
    r = run("fsdp")
    assert timeline(r) == FSDP_BF16_TIMELINE
    assert step_ms(r) == 10.25 and r.collectives == 9


def test_zero2_bf16_timeline_by_hand():
    # The same forward; backward waits for nothing, each reduce-scatter (fp32) after its unit.
    r = run("zero2")
    assert timeline(r) == FSDP_BF16_TIMELINE[:3] + [
        ("compute", "l2 bwd", 3.375, 5.375), ("compute", "l1 bwd", 5.375, 7.375),
        ("compute", "l0 bwd", 7.375, 9.375)] + FSDP_BF16_TIMELINE[6:9] + [
        ("comm", "l2 reduce-scatter", 5.375, 5.875), ("comm", "l1 reduce-scatter", 7.375, 7.875),
        ("comm", "l0 reduce-scatter", 9.375, 9.875)]
    assert step_ms(r) == 9.875


@pytest.mark.parametrize("name", ["fsdp", "zero2"])
@pytest.mark.parametrize("model", ["mlp-4x1024", "transformer-small"])
def test_closed_form_matches_the_engine_with_casts(name, model):
    profile = build_profile(parse_model(model), "h100")
    p = plan(profile, make_strategy(name, param_dtype="bf16", cast_gbps=3350.0))
    inputs = resolve(profile, unit_link(alpha_ms=0.05), 4, contention="none")
    assert closed_form_step_s(p, inputs) == pytest.approx(simulate(p, inputs).step_s, rel=1e-9)


def test_the_policy_is_strategy_data_and_old_specs_load():
    s = with_precision(make_strategy("zero2"), "bf16", cast_gbps=2039.0)
    assert (s.param_dtype, s.cast_gbps, s.name) == ("bf16", 2039.0, "zero2")
    assert Strategy.from_dict(s.to_dict()) == s
    old = make_strategy("fsdp").to_dict()
    for key in ("param_dtype", "cast_gbps"):     # a spec written before the policy
        del old[key]
    assert Strategy.from_dict(old) == make_strategy("fsdp")
    # fp32 and tf32 change nothing; bf16 changes nothing but fsdp and zero2 (autocast there)
    assert with_precision(make_strategy("fsdp"), "tf32") == make_strategy("fsdp")
    assert with_precision(make_strategy("ddp"), "bf16") == make_strategy("ddp")


@pytest.mark.parametrize("kw, message", [
    ({"name": "ddp", "param_dtype": "bf16"}, "applies to fsdp and zero2 only"),
    ({"name": "fsdp", "param_dtype": "fp8"}, "param_dtype: unknown 'fp8'"),
    ({"name": "fsdp", "param_dtype": "bf16", "cast_gbps": 0.0}, "cast_gbps must be a number"),
])
def test_bad_policies_are_input_errors(kw, message):
    name = kw.pop("name")
    with pytest.raises(InputError, match=message):
        make_strategy(name, **kw)
    with pytest.raises(InputError, match="--precision: unknown 'fp64'"):
        with_precision(make_strategy("fsdp"), "fp64")


def test_cast_rate_prefers_what_the_host_measured():
    assert cast_rate(1.5, 3350.0, "h100")[0] == 3.0           # a copy reads and writes
    assert cast_rate(None, get_device("h200").mem_gbps, "h200")[0] == 4800.0
    assert cast_rate(None, None)[0] is None


def _simulate_json(capsys, *argv) -> dict:
    assert main(["simulate", "--format", "json", "--world-size", "2", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def strategy_heading(out: str, strategy: str) -> str:
    """simulate's line naming the configuration (its units, precision and casts)."""
    (line,) = [x for x in out.splitlines() if x.split(",")[0] == strategy]
    return line


def fully_shard_keywords(text: str) -> dict[str, str]:
    """The keywords of the ``fully_shard(unit, ...)`` call ``text`` tells the user to make."""
    start = text.index("fully_shard(")
    depth, end = 0, start
    for end in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if text[end] == ")" and depth == 0:
            break
    call = ast.parse(text[start:end + 1], mode="eval").body
    return {k.arg: ast.unparse(k.value) for k in call.keywords}


def test_simulate_precision_bf16_mirrors_realrun(capsys, tmp_path):
    fp32 = _simulate_json(capsys, "--strategy", "fsdp")
    bf16 = _simulate_json(capsys, "--strategy", "fsdp", "--precision", "bf16")
    assert (bf16["param_dtype"], bf16["cast_gbps"]) == ("bf16", 2039.0)   # a100, the default
    assert bf16["allreduce_bytes"] == fp32["allreduce_bytes"]
    # fsdp gathers every unit twice and reduce-scatters it once: 3 B -> 2 B on the wire
    assert bf16["wire_bytes"] * 3 == fp32["wire_bytes"] * 2
    assert bf16["step_ms"] < fp32["step_ms"]
    # autocast for a replicated strategy: the same bytes, the same step
    ddp = [_simulate_json(capsys, "--strategy", "ddp", "--precision", p) for p in ("fp32", "bf16")]
    assert ddp[0]["step_ms"] == ddp[1]["step_ms"] and ddp[1]["param_dtype"] is None
    assert main(["simulate", "--strategy", "zero2", "--precision", "bf16"]) == 0
    heading = strategy_heading(capsys.readouterr().out, "zero2")   # says the cast rate taken
    assert "a100" in heading and "2039" in heading.split()
    # a profile file: its measured host's copy rate, or, without host costs, not timed
    path = tmp_path / "prof.json"
    profile = build_profile(parse_model("mlp-4x1024"))
    save_json(path, profile_to_json(profile))
    assert _simulate_json(capsys, "--model", str(path), "--strategy", "zero2",
                          "--precision", "bf16")["cast_gbps"] is None
    assert main(["simulate", "--model", str(path), "--strategy", "zero2",
                 "--precision", "bf16"]) == 0
    heading = strategy_heading(capsys.readouterr().out, "zero2")   # and that none was
    assert "GB/s" not in heading and "bf16" in heading
    host = Host("box", {"fsdp": HostCosts(copy_gbps=1.5)})
    save_json(path, profile_to_json(profile, host))
    assert _simulate_json(capsys, "--model", str(path), "--strategy", "zero2",
                          "--precision", "bf16")["cast_gbps"] == 3.0


def test_sweep_precision_bf16_halves_fsdps_all_gathers_and_leaves_fp32_as_before(capsys):
    # the library: fsdp's rows take the policy, ddp's do not; fp32 is the sweep of before
    from simddp.presets import get_link
    from simddp.predict.sweep import sweep
    profile = build_profile(parse_model("transformer-small"), get_device("h100"), 8, 1024)
    link = get_link("pcie-2x2080ti")
    plain = sweep(profile, link, 2, ["ddp", "fsdp"], [25], contention="none")
    mixed = sweep(profile, link, 2, ["ddp", "fsdp"], [25], precision="bf16", cast_gbps=3350.0,
                  contention="none")
    assert [r.spec.param_dtype for r in mixed] == [None, "bf16"]
    assert mixed[0].step_s == plain[0].step_s            # ddp: autocast, the same fp32 bytes
    assert mixed[1].step_s < plain[1].step_s             # fsdp: half the all-gathered bytes
    # the command: one line says which rows and how the casts are timed; fp32 JSON unchanged
    args = ["sweep", "--model", "transformer-small", "--device", "h100", "--link",
            "pcie-2x2080ti", "--strategies", "ddp,fsdp", "--bucket-mb", "25"]
    assert main([*args, "--precision", "bf16", "--explain"]) == 0
    out = capsys.readouterr().out
    assert main([*args, "--precision", "bf16", "--format", "json"]) == 0
    precision = json.loads(capsys.readouterr().out)["setup"]["precision"]
    assert (precision["precision"], precision["cast_gbps"]) == ("bf16", 3350.0)
    assert precision["note"] in out.splitlines()      # the one line, as the JSON has it
    # it names the rows that take the policy (fsdp, not ddp) and the device's rate
    rows = precision["note"].split(":")[1].split()[0]
    assert rows == "fsdp" and "h100" in precision["note"] and "3350" in precision["note"]
    # where fsdp is the pick, its torch line names the policy (transformer-xl on this pair)
    xl = ["sweep", "--model", "transformer-xl", "--device", "h100", "--link", "pcie-2x2080ti",
          "--strategies", "ddp,fsdp", "--bucket-mb", "25", "--precision", "bf16", "--explain"]
    assert main(xl) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines()
               if x.startswith("Model states per rank")]
    assert fully_shard_keywords(line) == {
        "reshard_after_forward": "True",
        "mp_policy": "MixedPrecisionPolicy(param_dtype=torch.bfloat16, "
                     "reduce_dtype=torch.float32)"}
    assert main([*args, "--format", "json"]) == 0
    assert "precision" not in json.loads(capsys.readouterr().out)["setup"]
    assert main([*args, "--format", "json", "--precision", "bf16"]) == 0
    setup = json.loads(capsys.readouterr().out)["setup"]
    assert setup["precision"]["cast_gbps"] == 3350.0

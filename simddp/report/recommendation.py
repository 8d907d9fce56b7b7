"""The sentences a user reads after a sweep: which bucket_cap_mb, by how much, what is fastest.

    >>> from simddp import build_profile, get_link, parse_model, recommend, sweep
    >>> results = sweep(build_profile(parse_model("transformer-small")), get_link("eth-100g"),
    ...                 2, ["naive", "ddp"], [1, 10, 100])
    >>> print(recommendation_text(recommend(results), results[0]).splitlines()[0][:73])
    Recommended bucket_cap_mb: 10 — ddp predicts 97.12 ms per step; the runne

Used by ``simddp sweep`` and ``realrun validate``; each line is computed from the rows it
summarises.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from simddp.predict.layouts import sizes_text
from simddp.planning.plans import plan
from simddp.inputs.profile import ModelProfile
from simddp.report.frameworks import framework_text
from simddp.report.table import fmt_mb, fmt_ms, fmt_range, fmt_speedup
from simddp.result import Result
from simddp.planning.registry import Name
from simddp.planning.registry import DDP_FIRST_BUCKET_MB
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB as DDP_DEFAULT, Strategy
from simddp.predict.sweep import accumulates
from simddp.predict.recommend import NEAR_PCT, Recommendation, Stakes, StrategyPick

# A decision line fits a terminal and a chat message.
DECISION_WIDTH = 100


def decision_text(rec: Recommendation | None, st: Stakes | None,
                  results: Sequence[Result] = (), profile: ModelProfile | None = None,
                  naive: Result | None = None) -> str:
    """The recommendation as a user acts on it, in at most four lines: the decision, what is
    at stake, how to set it, and a faster path; the reasoning is ``--explain``'s.

        >>> rows = [Result("m", "l", "ddp", mb, 2, s, 0.0, 1) for mb, s in
        ...         ((1, 0.105), (10, 0.100), (100, 0.1004), (1000, 0.120))]
        >>> from simddp.predict.recommend import recommend, stakes
        >>> rec = recommend(rows)
        >>> print(decision_text(rec, stakes(rec, rows), rows))
        Recommended bucket_cap_mb: 10 for torch DDP, 100.00 ms per step
        10 and 100 MB are within 0.4 % of it; 1000 MB is 20.0 % slower.
        torch 2.13: DistributedDataParallel(model, bucket_cap_mb_list=[1, 10])
        The fastest configuration swept. Why, Accelerate and Lightning: --explain
    """
    if rec is None or st is None:
        return "No bucketed strategy (ddp, bucketed, no_sync) in this sweep: nothing to set."
    mb = fmt_mb(rec.bucket_mb)
    accum = rec.spec is not None and rec.spec.accumulates
    knob = "bucket_mb" if rec.strategy == Name.BUCKETED else "bucket_cap_mb"
    who = {Name.BUCKETED: "realrun.DDP bucketed", Name.NO_SYNC: "torch DDP with no_sync"}
    lines = [f"Recommended {knob}: {mb} for {who.get(rec.strategy, 'torch DDP')}, "
             f"{fmt_ms(rec.step_s)} ms per {'optimizer step' if accum else 'step'}"]
    low_high = rec.step_range_s
    span = ("" if low_high is None or fmt_ms(low_high[0]) == fmt_ms(low_high[1])
            else f" ({fmt_range(low_high)} ms over the ranges)")
    if len(lines[0] + span) <= DECISION_WIDTH:
        lines[0] += span
    lines.append(_stakes_line(rec, st, profile))
    lines.append(_how_line(rec, results))
    lines.append(_faster_line(rec, st, naive))
    return "\n".join(lines)


def _stakes_line(rec: Recommendation, st: Stakes, profile: ModelProfile | None) -> str:
    """What the choice decides: which sizes are as good, which one costs what."""
    others = [mb for mb in st.near_mb if mb != rec.bucket_mb]
    if not others and st.worst_mb is None:
        return "No other bucket layout was swept: try --bucket-mb 1,10,100,1000."
    if not others:
        line = (f"It matters: the next best, {fmt_mb(rec.runner_up_mb)} MB, is "
                f"{_pct(rec.runner_up_step_s / rec.step_s - 1)} slower")
    elif st.worst_mb is None:
        line = f"Any swept size will do: {_sizes(st)} are all within {_within(st.near_pct)}"
    else:
        line = f"{_sizes(st)} are within {_within(st.near_pct)} of it"
    if (others and DDP_DEFAULT in st.near_mb and rec.bucket_mb != DDP_DEFAULT
            and rec.strategy != Name.BUCKETED):
        line += ", torch's default 25 among them"
    if st.worst_mb is not None:
        line += f"; {fmt_mb(st.worst_mb)} MB is {st.worst_pct:.1f} % slower"
    line += "."
    edge = rec.edge is not None and (profile is None or rec.spec is None
                                     or cap_changes_plan(profile, rec.spec, rec.edge))
    extend = f" Best at the {rec.edge} size swept: extend --bucket-mb."
    if edge and len(line + extend) <= DECISION_WIDTH:
        line += extend
    return line


def _how_line(rec: Recommendation, results: Sequence[Result]) -> str:
    """The call that runs the recommended rows."""
    mb, first = fmt_mb(rec.bucket_mb), fmt_mb(DDP_FIRST_BUCKET_MB)
    if rec.strategy == Name.BUCKETED:
        return f'realrun: realrun.DDP(model, strategy="bucketed", bucket_mb={mb})'
    plain = _bucketed_step_s(results, rec.bucket_mb)
    if mb == first or (plain is not None and plain / rec.step_s - 1 < NEAR_PCT / 100):
        line = f"torch: DistributedDataParallel(model, bucket_cap_mb={mb})"
        if len(line) + 31 + len(mb) <= DECISION_WIDTH:
            line += f" · HF Trainer: ddp_bucket_cap_mb={mb}"
    else:  # torch 2.13 keeps the 1 MiB first bucket only with the list (docs/CLI.md)
        line = f"torch 2.13: DistributedDataParallel(model, bucket_cap_mb_list=[{first}, {mb}])"
    if rec.strategy == Name.NO_SYNC:
        line += "; no_sync() on all but the last micro-step"
    return line


def _faster_line(rec: Recommendation, st: Stakes, naive: Result | None) -> str:
    """Whether anything swept is faster, and what runs it; where to read why."""
    f = st.faster
    if naive is not None and naive.step_s < rec.step_s * (1 - NEAR_PCT / 100) and (
            f is None or naive.step_s <= f.step_s):
        return (f"naive is fastest: {fmt_ms(naive.step_s)} ms per step, "
                f"{_pct(1 - naive.step_s / rec.step_s)} less; nothing overlaps here. --explain")
    if f is not None and f.spec is not None and f.spec.beyond_ddp:  # the pick's line says it
        return f"Faster, beyond plain DDP: {_config(f)}, as the next lines say. Why: --explain"
    if f is not None:
        return (f"Faster, not torch DDP: {_config(f)}, {fmt_ms(f.step_s)} ms "
                f"({_pct(1 - f.step_s / rec.step_s)} less; realrun.DDP runs it). --explain")
    fastest = rec.fastest
    if fastest is not None and fastest.step_s < rec.step_s:
        return (f"Within {NEAR_PCT:g} % of the fastest swept ({_config(fastest)}). Why, "
                "Accelerate and Lightning: --explain")
    speedup = ("" if naive is None or rec.step_s <= 0
               else f" ({fmt_speedup(naive.step_s / rec.step_s)} naive)")
    return f"The fastest configuration swept{speedup}. Why, Accelerate and Lightning: --explain"


def _within(pct: float) -> str:
    return "0.1 %" if pct < 0.1 else f"{pct:.1f} %"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f} %"


def _sizes(st: Stakes) -> str:
    """'10–200 MB' for a run of three or more swept sizes, else '10 and 100 MB'."""
    mbs = st.near_mb
    if len(mbs) >= 3 and st.near_is_a_run:
        return f"{fmt_mb(mbs[0])}–{fmt_mb(mbs[-1])} MB"
    return sizes_text([float(fmt_mb(mb)) for mb in mbs])


def fastest_row(results: list[Result], rec: Recommendation | None) -> dict | None:
    """The fastest per-step configuration as JSON (sweep's ``fastest``); None if none."""
    per_step = [r for r in results if not accumulates(r)]
    best = rec.fastest if rec is not None else min(per_step, key=lambda r: r.step_s, default=None)
    if best is None:
        return None
    return {"strategy": best.strategy, "step_ms": best.step_s * 1e3,
            "bucket_mb": None if best.bucket_mb is None else round(best.bucket_mb, 6)}


def recommendation_text(rec: Recommendation | None, naive: Result | None = None, *,
                        results: Sequence[Result] | None = None,
                        profile: ModelProfile | None = None) -> str:
    """The sentences ``--explain`` prints: which bucket_cap_mb, by how much, and what is
    fastest. ``profile`` lets "extend --bucket-mb" be said only where a cap beyond the swept
    ones would change the plan (:func:`cap_changes_plan`)."""
    if rec is None:
        return "No bucketed strategy (ddp, bucketed, no_sync) in this sweep: no bucket size " \
               "to recommend."
    per = "per step"
    per_optimizer_step = rec.spec is not None and rec.spec.accumulates   # no_sync
    if per_optimizer_step:
        per = "per optimizer step (with gradient accumulation; ddp was not swept)"
    text = (f"Recommended bucket_cap_mb: {fmt_mb(rec.bucket_mb)} — {rec.strategy} predicts "
            f"{fmt_ms(rec.step_s)} ms {per}")
    if rec.step_range_s is not None:
        text += f" (range {fmt_range(rec.step_range_s)} ms)"
    if rec.point_best_mb is not None:
        text += (f". At the point estimate {fmt_mb(rec.point_best_mb)} MB is faster "
                 f"({fmt_ms(rec.runner_up_step_s)} ms), but over the prediction ranges it can "
                 f"be {100 * rec.point_best_worst_regret:.1f}% slower than the best, while "
                 f"{fmt_mb(rec.bucket_mb)} MB stays within {100 * rec.worst_regret:.1f}%: "
                 f"recommended for the lowest worst-case regret.")
    elif rec.runner_up_mb is None:
        text += (" (no other bucket layout swept: sizes that make the same buckets count as "
                 "one; try --bucket-mb 1,10,100).")
    else:
        margin_pct = 100 * rec.margin_s / max(rec.step_s, 1e-300)
        text += (f"; the runner-up, {fmt_mb(rec.runner_up_mb)} MB, is {fmt_ms(rec.margin_s)} ms "
                 f"({margin_pct:.1f}%) slower ({fmt_ms(rec.runner_up_step_s)} ms).")
        if round(margin_pct, 1) < 1:
            text += (" A margin under 1% is below what a prediction can tell apart: measure both "
                     "(realrun bench) where it matters.")
        if rec.worst_regret is not None and round(100 * rec.worst_regret, 1) > 0:
            text += (f" Over the prediction ranges it stays within {100 * rec.worst_regret:.1f}% "
                     "of the best size.")
        elif rec.worst_regret is not None:
            text += " It stays the best size over the prediction ranges."
    if rec.edge is not None and (profile is None or rec.spec is None
                                 or cap_changes_plan(profile, rec.spec, rec.edge)):
        what = "size" if not rec.same_layout_mb else (
            f"bucket layout ({', '.join(fmt_mb(mb) for mb in rec.same_layout_mb)} and "
            f"{fmt_mb(rec.bucket_mb)} MB make the same buckets)")
        text += (f" It is the {rec.edge} {what} swept; sizes beyond it might be faster still "
                 f"— extend --bucket-mb.")
    if rec.spec is not None and rec.spec.implementation == "torch" and not per_optimizer_step:
        text += "\n" + torch_call_text(rec.bucket_mb)   # ddp's rows
        text += "\n" + framework_text(rec.bucket_mb, _bucketed_step_s(results, rec.bucket_mb))
    if per_optimizer_step:  # per optimizer step: not comparable to a step
        return text
    fastest = fastest_text(rec, naive, results)
    return text + ("\n" + fastest if fastest else "")


def cap_changes_plan(profile: ModelProfile, spec: Strategy, edge: str) -> bool:
    """Whether a cap beyond ``spec``'s on the ``edge`` ("largest" or "smallest") side makes
    other buckets: not once all gradients after the first bucket share one, nor once every
    bucket holds one tensor."""
    total = profile.grad_total_bytes + 1
    cap = total if edge == "largest" else 1
    first = cap if spec.first_bucket_bytes == spec.bucket_bytes else spec.first_bucket_bytes
    other = dataclasses.replace(spec, bucket_bytes=cap, first_bucket_bytes=first)
    return plan(profile, spec).buckets != plan(profile, other).buckets


def _bucketed_step_s(results: Sequence[Result] | None, bucket_mb: float) -> float | None:
    """The plain bucketed row at ``bucket_mb``: what bucket_cap_mb alone runs on torch 2.13."""
    return next((r.step_s for r in results or () if r.strategy == Name.BUCKETED
                 and r.bucket_mb is not None and fmt_mb(r.bucket_mb) == fmt_mb(bucket_mb)
                 and not accumulates(r)), None)


def fastest_text(rec: Recommendation, naive: Result | None,
                 results: Sequence[Result] | None = None) -> str:
    """One line: the fastest per-step configuration of ``results`` (else ``rec.fastest``) and
    the ``naive`` baseline, naming every configuration tied to the fastest."""
    rows = [r for r in results if not accumulates(r)] if results is not None else \
        [r for r in (rec.fastest,) if r is not None]
    if not rows:
        return ""
    best_s = min(r.step_s for r in rows)
    tied = [r for r in rows if r.step_s == best_s]
    if naive is not None and naive.step_s < best_s:   # the baseline row, printed aside
        return (f"naive is fastest: {fmt_ms(naive.step_s)} ms per step (the speedup "
                f"baseline); no swept configuration beats it — the fastest, {_configs(tied)}, "
                f"takes {fmt_ms(best_s)} ms ({_more(best_s, naive.step_s)}).")
    recommended = [r for r in tied if r.strategy == rec.strategy and r.bucket_mb == rec.bucket_mb]
    f = recommended[0] if recommended else (
        rec.fastest if rec.fastest in tied else tied[0])
    if f.spec is not None and f.spec.is_baseline:
        others = [r for r in rows if not (r.spec is not None and r.spec.is_baseline)]
        text = f"naive is fastest: {fmt_ms(f.step_s)} ms per step"
        if others:
            nxt = min(others, key=lambda r: r.step_s)
            text += (f"; the next, {_config(nxt)}, takes {fmt_ms(nxt.step_s)} ms "
                     f"({_more(nxt.step_s, f.step_s)})")
        return text + "."
    if recommended:
        text = (f"The recommended {rec.strategy} at {fmt_mb(rec.bucket_mb)} MB is also the "
                "fastest configuration overall")
    else:
        text = f"Fastest configuration overall: {_configs(tied)}, {fmt_ms(f.step_s)} ms per step"
    if naive is None or f.step_s <= 0:
        return text + "."
    speedup = naive.step_s / f.step_s
    if f"{speedup:.2f}" != "1.00":
        return text + f" ({speedup:.2f}× faster than naive)."
    less = 100 * (1 - f.step_s / naive.step_s)
    return text + (f" ({less:.1f}% less time than naive)." if round(less, 1) > 0
                   else " (the same as naive to 0.1%).")


def _more(slower_s: float, faster_s: float) -> str:
    """'23.17 ms, 16.0% more'; 'under 0.1% more' where one decimal would read 0.0%."""
    pct = 100 * (slower_s / faster_s - 1)
    share = f"{pct:.1f}%" if round(pct, 1) > 0 else "under 0.1%"
    return f"{fmt_ms(slower_s - faster_s)} ms, {share} more"


def _configs(rows: Sequence[Result]) -> str:
    """Tied configurations by name: 'hierarchical at 1 and 2 MB', 'overlap and ddp at 1 MB'."""
    by_name: dict[str, list[float]] = {}
    for r in rows:
        by_name.setdefault(r.strategy, []).extend([] if r.bucket_mb is None else [r.bucket_mb])
    parts = [name + ("" if not mbs else f" at {sizes_text([float(fmt_mb(mb)) for mb in mbs])}")
             for name, mbs in by_name.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def torch_call_text(bucket_mb: float) -> str:
    """How to ask torch DDP for the ddp rows at ``bucket_mb``.

        >>> torch_call_text(1.0)
        'In torch: DistributedDataParallel(model, bucket_cap_mb=1) runs the ddp rows (its first bucket is 1 MB as well, so the ddp and bucketed rows at 1 MB are one configuration).'
    """
    mb, first = fmt_mb(bucket_mb), fmt_mb(DDP_FIRST_BUCKET_MB)
    if mb == first:  # [1, 1]: the list says nothing a plain cap doesn't
        return (f"In torch: DistributedDataParallel(model, bucket_cap_mb={mb}) runs the ddp "
                f"rows (its first bucket is {first} MB as well, so the ddp and bucketed rows "
                f"at {mb} MB are one configuration).")
    # torch 2.13 keeps the 1 MiB first bucket only at the default cap (docs/CLI.md)
    return (f"In torch: DistributedDataParallel(model, bucket_cap_mb_list=[{first}, {mb}]) runs "
            f"the ddp rows (torch 2.13, as realrun runs it; a torch without "
            f"bucket_cap_mb_list takes bucket_cap_mb={mb}); on 2.13 a plain "
            f"bucket_cap_mb={mb} makes the first bucket {mb} MB too (the bucketed rows).")


def _config(r: Result) -> str:
    return r.strategy + ("" if r.bucket_mb is None else f" at {fmt_mb(r.bucket_mb)} MB")


def fmt_bytes(n: float, like: float | None = None) -> str:
    """Memory as people read it: '3.93 GB' (1e9 bytes), or '12.0 MiB' when ``like`` (default
    ``n``) is under 1 GB, so the parts of a total read in the total's unit."""
    like = n if like is None else like
    return f"{n / 1e9:.2f} GB" if like >= 1e9 else f"{n / 2**20:.1f} MiB"


def _states(states: dict[str, int]) -> str:
    total = sum(states.values())
    parts = ", ".join(f"{k.replace('_', ' ')} {fmt_bytes(v, total)}" for k, v in states.items())
    return f"{fmt_bytes(total)} ({parts})"


def _caveat(spec: Strategy) -> str:
    """What else changes besides the step time, for a strategy beyond plain DDP."""
    h = spec.comm_hook
    if spec.two_level:
        return (" realrun.DDP runs it (realrun bench --strategies hierarchical "
                "--gpus-per-node G); NCCL's own choice across nodes is the ring or the tree. "
                "The law assumes one NIC per GPU: where a node's GPUs share one, as on an "
                "emulated host, its cross-node phase takes up to G× longer "
                "(docs/FINDINGS.md#hierarchical-phases).")
    if h is None:
        torch_dtype = {"bf16": "torch.bfloat16", "fp16": "torch.float16"}
        dtype = torch_dtype.get(spec.param_dtype or "")
        reduce = torch_dtype.get(spec.grad_dtype or "", "torch.float32")
        policy = ", ".join(([f"param_dtype={dtype}"] if dtype else [])
                           + ([f"reduce_dtype={reduce}"] if dtype or spec.grad_dtype else []))
        policy = f", mp_policy=MixedPrecisionPolicy({policy})" if policy else ""
        mesh = ("mesh=init_device_mesh(\"cuda\", (nodes, gpus_per_node), mesh_dim_names="
                "(\"replicate\", \"shard\")), " if spec.hybrid else "")
        return (f" In torch: fully_shard(unit, {mesh}reshard_after_forward="
                f"{spec.reshard_after_forward}{policy}) on each unit "
                "(one layer, or --shard-unit-mb), then on the model.")
    if h.kind == "powersgd":
        return (f" PowerSGD is lossy (rank-{h.rank} approximation with error feedback) and "
                f"sends plain all-reduces for its first {h.start_iter} steps "
                "(start_powerSGD_iter): check convergence.")
    return (f" {h.name} rounds every gradient to 16 bits before summing: check convergence"
            + (" (bf16_compress_hook needs NCCL)." if h.kind == "bf16" else "."))


def strategy_text(pick: StrategyPick | None, states: dict[str, dict[str, int]],
                  hook_compute_charged: bool = True,
                  results: Sequence[Result] | None = None, brief: bool = False) -> str:
    """Whether sharding, a comm hook or the hierarchical all-reduce beats plain data
    parallelism, and the memory it moves. ``states``: model states per rank by strategy name
    (simddp.analytic.states); ``hook_compute_charged`` False: a hook's compute was free;
    ``brief``: the verdict and memory totals only (the rest is ``--explain``'s).
    """
    if pick is None:
        return ""
    best, versus = pick.best, pick.versus
    mem = states.get(best.strategy)
    if versus is None:
        text = f"Fastest strategy: {_config(best)}, {fmt_ms(best.step_s)} ms per step."
    elif pick.faster:
        text = (f"Recommended strategy: {_config(best)} — {fmt_ms(best.step_s)} ms per step, "
                f"{100 * pick.gain:.1f}% less than {_config(versus)} "
                f"({fmt_ms(versus.step_s)} ms).")
        if round(100 * pick.gain, 1) < 1:
            text += " A gain under 1% is below what a prediction can tell apart."
    else:
        slower = -100 * pick.gain
        than = (f"{slower:.1f}% more than" if round(slower, 1) > 0 else "the same as")
        kinds = beyond_kinds(results if results is not None else [best])
        plural = len(kinds) > 1 or "comm hooks" in kinds[0]
        what = _and(kinds)
        text = (f"{what[:1].upper()}{what[1:]} {'are' if plural else 'is'} not faster here: "
                f"{'the best of them' if plural else 'its best row'}, {_config(best)}, takes "
                f"{fmt_ms(best.step_s)} ms per step, {than} {_config(versus)} "
                f"({fmt_ms(versus.step_s)} ms).")
    if brief:
        if mem is not None:
            text += f"\nModel states per rank: {fmt_bytes(sum(mem.values()))}"
            if versus is not None and versus.strategy in states:
                text += f"; {versus.strategy}: {fmt_bytes(sum(states[versus.strategy].values()))}"
            text += "."
        return text + (" How to run it, and what to check: --explain" if pick.faster else "")
    if mem is not None:
        text += f"\nModel states per rank: {_states(mem)}"
        if versus is not None and versus.strategy in states:
            text += f"; {versus.strategy}: {_states(states[versus.strategy])}"
        text += "."
    if pick.faster:
        text += _caveat(best.spec)
        hook = best.spec.comm_hook
        if hook and not hook_compute_charged:
            work = "matrix products and error feedback" if hook.kind == "powersgd" else "casts"
            text += (f" Its {work} are not charged: no host copy rate was measured "
                     "(--host, or a profile from realrun profile).")
    return text


def beyond_kinds(results: Sequence[Result]) -> list[str]:
    """What the rows beyond plain DDP are, in words: 'sharding', 'comm hooks', 'the
    hierarchical all-reduce' (an all-reduce algorithm, neither sharding nor a hook)."""
    kinds = []
    for r in results:
        spec = r.spec
        kind = None if spec is None or not spec.beyond_ddp else (
            "sharding" if spec.reshard_after_forward is not None else
            "comm hooks" if spec.comm_hook is not None else "the hierarchical all-reduce")
        if kind is not None and kind not in kinds:
            kinds.append(kind)
    return sorted(kinds, key=("sharding", "comm hooks", "the hierarchical all-reduce").index) \
        or ["sharding and comm hooks"]


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]

"""A sweep's whole answer, worked out once: the rows, the bucket size, the strategy, the why.

``simddp sweep`` is resolve → sweep → :func:`answer` → render: the table, the sentences and
the JSON all render from one :class:`SweepAnswer` (simddp/report/sweep_text.py,
sweep_json.py), so they cannot disagree::

    >>> from simddp import build_profile, get_link, parse_model, resolve
    >>> from simddp.predict.sweep import configurations, sweep_inputs
    >>> inputs = resolve(build_profile(parse_model("transformer-small")), get_link("eth-100g"))
    >>> results = sweep_inputs(inputs, configurations(["naive", "ddp"], [10, 25, 100]), ranges=True)
    >>> a = answer(inputs, results)
    >>> a.recommendation.bucket_mb, a.naive.strategy, a.optimum["regime"]
    (25.0, 'naive', 'comm-bound')
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simddp.analytic.optimal_bucket import closed_form_optimum
from simddp.analytic.optimum_gap import gap_line
from simddp.analytic.states import FP32_ADAM, PerParam, state_bytes
from simddp.analytic.traffic import at_dtype
from simddp.sim.costs import shard_ranks_of
from simddp.inputs.link_file import LinkFile
from simddp.inputs.resolved import Inputs
from simddp.planning.grad_dtype import GRAD_DTYPES
from simddp.planning.plans import plan
from simddp.planning.registry import Name
from simddp.predict.recommend import (Recommendation, Stakes, StrategyPick, recommend,
                                      recommend_strategy, stakes)
from simddp.predict.sweep import (DEFAULT_BUCKET_MB, configurations, naive_of, sweep_inputs,
                                  sweep_rows)
from simddp.result import Result


@dataclass(frozen=True)
class SweepAnswer:
    """Everything a sweep answers: ``results`` in table order, ``naive`` the speedup baseline
    (a row, or simulated aside), ``recommendation`` and its ``stakes``, the strategy ``pick``
    and its model ``states``, the closed form's ``optimum``; None where nothing was swept for
    them."""

    inputs: Inputs
    link_file: LinkFile
    results: list[Result]
    naive: Result
    recommendation: Recommendation | None
    pick: StrategyPick | None
    states: dict[str, dict[str, int]]
    optimum: dict
    request: "SweepRequest"
    stakes: Stakes | None = None

    @property
    def rows(self) -> list[dict]:
        """One plain dict per result, ms on the outside (the JSON's and the CSV's rows)."""
        return sweep_rows(self.results, self.naive)

    @property
    def gap(self) -> str | None:
        """Why the closed form's optimum and the simulator's best differ; None: they agree."""
        return self.optimum.get("differs_from_simulator")

    @property
    def split(self) -> dict | None:
        """The comm factors of a collective's α part and bytes part where the model's own
        contention was split (simddp/rig/); None where one factor slows it all."""
        inputs = self.inputs
        if inputs.topology is not None or inputs.effects is None:
            return None
        c, bytes_factor = inputs.effects.split(inputs.contention, inputs.profile, inputs.link,
                                               inputs.world_size)
        return None if bytes_factor is None else {"alpha": c.comm, "bytes": bytes_factor}

    @property
    def mixed_precision(self) -> str:
        """The line saying which rows run FSDP2's mixed precision and how their casts are
        timed; "" where none does."""
        specs = [r.spec for r in self.results if r.spec is not None and r.spec.param_dtype]
        if not specs:
            return ""
        r = self.request
        rows = ", ".join(sorted({s.name for s in specs}))
        return (f"precision {r.precision}: {rows} under FSDP2's MixedPrecisionPolicy "
                f"({specs[0].param_dtype} all-gathers, {specs[0].grad_dtype or 'fp32'} "
                "reduce-scatters), casts "
                f"{'at ' if r.cast_gbps else ''}{r.casts}")


    @property
    def grad_dtype(self) -> str | None:
        """The dtype the rows reduce gradients in (--grad-dtype); None: fp32."""
        return grad_dtype_of(self.results)

    @property
    def grad_dtype_note(self) -> str:
        """The line saying the rows reduce 16-bit gradients; "" at fp32."""
        dtype = self.grad_dtype
        if dtype is None:
            return ""
        return (f"gradients reduced in {dtype} (--grad-dtype): all-reduces and "
                f"reduce-scatters move {dtype} bytes, --bucket-mb counts them "
                "(simddp/planning/grad_dtype.py)")


def grad_dtype_of(results: Sequence[Result]) -> str | None:
    """The dtype ``results`` reduce gradients in (the first row that says one); None: fp32."""
    return next((r.spec.grad_dtype for r in results
                 if r.spec is not None and r.spec.grad_dtype), None)


@dataclass(frozen=True)
class SweepRequest:
    """How a sweep was asked for, besides its configurations, as the flags gave it, with how
    FSDP2's casts are timed and the CPU host's caution (simddp/rig/cpu_share.py)."""

    accum_steps: int = 4
    comm_hooks: tuple[str, ...] = ()
    shard_unit_mb: float | None = None
    precision: str = "fp32"
    cast_gbps: float | None = None
    casts: str = ""
    adam: bool = True
    cpu_note: str = ""


def answer(inputs: Inputs, results: Sequence[Result], request: SweepRequest | None = None,
           link_file: LinkFile | None = None) -> SweepAnswer:
    """The answer to a sweep of ``results`` on ``inputs``."""
    request = request or SweepRequest()
    link_file = link_file or LinkFile(inputs.link)
    results = list(results)
    naive = naive_of(results)
    dtype = grad_dtype_of(results)
    if naive is None:  # the speedup column is always "vs naive": simulate the baseline anyway
        naive = sweep_inputs(inputs, configurations([Name.NAIVE], DEFAULT_BUCKET_MB,
                                                    grad_dtype=dtype))[0]
    rec = recommend(results)
    pick = recommend_strategy(results)
    # the closed form on the gradients as they are reduced (a bucket counts them at their dtype)
    reduced = inputs.profile if dtype is None else at_dtype(inputs.profile, GRAD_DTYPES[dtype])
    optimum = closed_form_optimum(reduced, inputs.link, inputs.world_size, inputs.contention)
    # the reasons name the contention the rows were predicted under (a default included)
    optimum["differs_from_simulator"] = gap_line(inputs, optimum, results)
    return SweepAnswer(inputs, link_file, results, naive, rec, pick,
                       model_states(pick, inputs, request.adam), optimum, request,
                       None if rec is None else stakes(rec, results))


def model_states(pick: StrategyPick | None, inputs: Inputs, adam: bool = True
                 ) -> dict[str, dict[str, int]]:
    """Model states per rank of the strategy pick and the plain configuration it is weighed
    against, from their plans (simddp/analytic/states.py), by strategy name."""
    if pick is None:
        return {}
    per = FP32_ADAM if adam else PerParam(optimizer=0)  # SGD: no state
    return {r.strategy: state_bytes(plan(inputs.profile, r.spec),
                                    shard_ranks_of(r.spec, inputs), per)
            for r in (pick.best, pick.versus) if r is not None}

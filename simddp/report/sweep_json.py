"""A sweep's answer as data: ``--format json``, and sweep.json, sweep.csv and sweep.png in --out.

Everything here renders a :class:`simddp.predict.answer.SweepAnswer`; the keys are
docs/FORMATS.md's ("The sweep's JSON")::

    >>> from simddp import build_profile, get_link, parse_model, resolve
    >>> from simddp.predict.answer import answer
    >>> from simddp.predict.sweep import configurations, sweep_inputs
    >>> inputs = resolve(build_profile(parse_model("mlp-4x1024")), get_link("eth-100g"))
    >>> a = answer(inputs, sweep_inputs(inputs, configurations(["naive", "ddp"], [1, 10])))
    >>> list(answer_json(a))
    ['rows', 'recommended_bucket_mb', 'recommended_from', 'fastest', 'recommended_strategy', 'closed_form_optimum', 'setup']
"""
from __future__ import annotations

import csv
import io
import json

from simddp.predict.answer import SweepAnswer
from simddp.predict.scenarios import range_sources
from simddp.report.levels import topology_json
from simddp.report.recommendation import fastest_row
from simddp.result import Result, results_to_json

CSV_FIELDS = ("strategy", "bucket_mb", "accum_steps", "collectives", "step_ms", "step_ms_low",
              "step_ms_high", "exposed_comm_ms", "compute_ms", "speedup", "speedup_vs", "source")


def answer_json(a: SweepAnswer) -> dict:
    """``--format json``: the rows, the summary and the setup."""
    return {"rows": a.rows, **summary(a), "setup": setup(a)}


def summary(a: SweepAnswer) -> dict:
    """What the sweep recommends, as data."""
    rec = a.recommendation
    return {"recommended_bucket_mb": None if rec is None else round(rec.bucket_mb, 6),
            "recommended_from": None if rec is None else rec.strategy,
            "fastest": fastest_row(a.results, rec),
            "recommended_strategy": pick_json(a),
            "closed_form_optimum": a.optimum}


def setup(a: SweepAnswer) -> dict:
    """The inputs of the sweep, as sweep.json's ``setup`` records them."""
    inputs, r = a.inputs, a.request
    profile, link, host = inputs.profile, inputs.link, inputs.host
    doc = {"model": profile.name, "tensors": profile.n_tensors,
           "grad_bytes": profile.grad_total_bytes, "forward_ms": profile.forward_s * 1e3,
           "backward_ms": profile.backward_s * 1e3, "optimizer_ms": profile.optimizer_s * 1e3,
           "link": link.name, "alpha_us": link.alpha_s * 1e6, "busbw_gbps": link.busbw_gbps,
           "world_size": inputs.world_size, "accum_steps": r.accum_steps,
           "host_costs": None if host is None else host.name,
           "contention": {"compute": inputs.contention.compute,
                          "comm": inputs.contention.comm,
                          "source": inputs.contention.source or None},
           "ranges": range_sources(inputs),
           "naive_step_ms": a.naive.step_s * 1e3,
           "comm_hooks": list(r.comm_hooks), "shard_unit_mb": r.shard_unit_mb}
    mixed = a.mixed_precision
    if mixed:   # only where a sharded row takes it: an fp32 sweep's JSON is as before
        doc["precision"] = {"precision": r.precision, "cast_gbps": r.cast_gbps, "note": mixed}
    if a.grad_dtype:   # likewise only where gradients are reduced in 16 bits
        doc["grad_dtype"] = a.grad_dtype
    doc["contention_split"] = a.split
    doc["cpu_note"] = r.cpu_note or None   # simddp/rig/cpu_share.py
    if inputs.topology is not None:
        doc["topology"] = topology_json(inputs.topology, a.link_file, profile,
                                        a.recommendation, a.results)
    return doc


def pick_json(a: SweepAnswer) -> dict | None:
    """The strategy recommendation as JSON (sweep's ``recommended_strategy``)."""
    pick = a.pick
    if pick is None:
        return None

    def row(r: Result) -> dict:
        return {"strategy": r.strategy, "step_ms": r.step_s * 1e3,
                "bucket_mb": None if r.bucket_mb is None else round(r.bucket_mb, 6),
                "model_state_bytes": a.states.get(r.strategy)}

    return {**row(pick.best), "faster": pick.faster, "gain": pick.gain,
            "versus": None if pick.versus is None else row(pick.versus)}


def out_files(a: SweepAnswer) -> dict[str, bytes | str]:
    """sweep.csv, sweep.json (simddp.results/1 plus the rows) and sweep.png, rendered in
    memory: nothing is written unless all of them could be made."""
    from simddp.report.sweep_plot import figure_png, sweep_figure  # matplotlib only when asked

    rows = a.rows
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        low, high = row.get("step_ms_range") or (None, None)
        writer.writerow({**{k: ("" if v is None else v) for k, v in row.items()},
                         "step_ms_low": "" if low is None else low,
                         "step_ms_high": "" if high is None else high})
    doc = results_to_json(a.results, rows=rows, setup=setup(a), **summary(a))
    rec = a.recommendation
    png = figure_png(sweep_figure(a.results, None if rec is None
                                  else (rec.strategy, rec.bucket_mb)))
    return {"sweep.csv": buf.getvalue(), "sweep.json": json.dumps(doc, indent=1) + "\n",
            "sweep.png": png}

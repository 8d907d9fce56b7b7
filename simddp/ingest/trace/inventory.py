"""What collectives one rank's trace holds, counted: for refusals that name them, and for a
summary that says what else ran beside the gradient syncs.

    inv = inventory(timeline)
    inv.host     # {"alltoall": 55, "reducescatter": 10, ...}: the calls the host recorded
    inv.ran      # {"allreduce": 10, ...}: what ran (CUDA: NCCL kernels; CPU: gloo threads)
    inv.text()   # 'all_to_all ×55, reduce_scatter ×10, all_reduce ×10 host ops'

A call appears on the host several times over (``c10d::allreduce_``, ``record_param_comms``,
``nccl:all_reduce``); one family is counted: NCCL's or Gloo's own ranges where the trace has
them, else ``record_param_comms``, else the ``c10d::`` ops.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from simddp.ingest.trace.rank_timeline import (HOST_CATEGORIES, Timeline, canonical_kind,
                                               comm_kind, kind_name)

_ORDER = ("alltoall", "reducescatter", "allgather", "allreduce", "broadcast", "sendrecv")


@dataclass(frozen=True)
class Inventory:
    host: dict             # kind -> calls the host recorded
    ran: dict              # kind -> collectives that ran (kernels on the GPU, gloo runs)
    device: str            # "cuda" or "cpu"

    def text(self, counts: dict | None = None, what: str = "host ops") -> str:
        """'all_to_all ×55, reduce_scatter ×10 host ops' (the host's calls by default)."""
        counts = self.host if counts is None else counts
        kinds = sorted(counts, key=lambda k: (_ORDER.index(k) if k in _ORDER else len(_ORDER), k))
        items = [f"{kind_name(k)} ×{counts[k]}" for k in kinds if k != "barrier"]
        return f"{', '.join(items)} {what}" if items else f"no collective {what}"

    def lacking(self, kind: str = "allreduce") -> str:
        """What the trace holds, and that no ``kind`` ran: a refusal's words."""
        where = "kernels on the GPU" if self.device == "cuda" else "runs on a gloo thread"
        held = self.text() if self.host else self.text(self.ran, where)
        return f"{held}, but no {kind_name(kind).replace('_', '-')} {where}"


def inventory(tl: Timeline) -> Inventory:
    """The collectives of ``tl``'s trace, counted (module text)."""
    host = [e for e in tl.trace.events if e.cat in HOST_CATEGORIES]
    families = (
        [e for e in host if e.name.startswith(("nccl:", "gloo:")) and comm_kind(e.name)
         and not (tl.device == "cpu" and e.name.startswith("gloo:"))],
        [e for e in host if e.name == "record_param_comms" and e.args.get("Collective name")],
        [e for e in host if e.name.startswith("c10d::") and comm_kind(e.name)],
    )
    calls = next((f for f in families if f), [])
    counted = Counter()
    for e in calls:
        kind = (canonical_kind(str(e.args["Collective name"]), strict=True)
                if e.name == "record_param_comms" else comm_kind(e.name))
        counted[kind or "other"] += 1
    ran = Counter(c.kind for c in tl.comms if not tl.local_comms)
    return Inventory(dict(counted), dict(ran), tl.device)

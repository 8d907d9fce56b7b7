"""What a queued small all-reduce costs once the backward is over, measured and predicted.

    python experiments/queue_tail.py --bench B/bench.json --profile prof.json --links cal/link.json

After the backward ends, a step's all-reduces still queued complete one after another with
no compute beside them: their pace is the per-collective cost the link's α and busbw stand
for, free of contention. ``realrun bench --timelines`` keeps, per configuration, the spans
of its median clocked step; for each configuration with collectives (e.g. ``overlap``,
``ddp:0.25``) this prints how many completed after the backward's end and the milliseconds
per collective from that end to the last one's, measured and predicted with each link given
(the same profile and host costs; ``simddp simulate``'s engine).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from simddp import load_host, load_link, load_profile, make_strategy, plan, simulate  # noqa: E402
from simddp.io import read_json, results_from_json  # noqa: E402
from simddp.result import COMM  # noqa: E402


def tail(spans) -> tuple[int, float]:
    """(collectives ending after the last backward span, ms per collective to the last)."""
    backward_end = max(s.end_s for s in spans if s.kind == "backward")
    ends = sorted(s.end_s for s in spans if s.lane == COMM and s.end_s > backward_end)
    if not ends:
        return 0, 0.0
    return len(ends), (ends[-1] - backward_end) * 1e3 / len(ends)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="realrun bench --timelines output")
    ap.add_argument("--profile", required=True, help="the model's profile (host costs in it)")
    ap.add_argument("--links", required=True, nargs="+", help="link files to predict with")
    a = ap.parse_args()
    measured = results_from_json(read_json(a.bench), a.bench)
    profile, host = load_profile(a.profile), load_host(a.profile)
    links = [(path, load_link(path)) for path in a.links]
    for m in measured:
        if not any(s.lane == COMM for s in m.spans) or not any(s.kind == "backward"
                                                               for s in m.spans):
            continue
        n, ms = tail(m.spans)
        name = m.strategy + (f":{m.bucket_mb:g}" if m.bucket_mb else "")
        line = f"{name:12s} measured {n:3d} after the backward, {ms:5.2f} ms each"
        steps = plan(profile, make_strategy(m.strategy, m.bucket_mb))
        for path, link in links:
            p = simulate(profile, link, steps, m.world_size, host=host)
            pn, pms = tail(p.spans)
            line += f" | α {link.alpha_s * 1e6:4.0f} µs: {pn:3d}, {pms:5.2f} ms"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The engine alone, old code against new: the minimum CPU time of 15 repeats of four plans.

    python bench/engine_ab.py new                             # in this checkout
    (cd OLD_CHECKOUT && python /path/to/bench/engine_ab.py old)

transformer-xl (435 tensors) over eth-100g, 2 ranks, plans naive, overlap, ddp 5 MB and
bucketed 5 MB, without and with contention (compute x1.3, comm x1.5: the interrupt path).
The minimum of CPU time is the steadiest figure on a shared box; run old and new in turn.
"""
import dataclasses
import sys
import time

from simddp import build_profile, parse_model, get_link, plan, make_strategy, simulate
p = build_profile(parse_model("transformer-xl"))
link = get_link("eth-100g")
clink = dataclasses.replace(link, compute_slowdown=1.3, comm_slowdown=1.5)
plans = [plan(p, make_strategy(n, 5)) for n in ("naive", "overlap", "ddp", "bucketed")]
def run(lk):
    best = 1e9
    for _ in range(15):
        t = time.process_time()
        for pl in plans: simulate(p, lk, pl, 2, record=False)
        best = min(best, time.process_time() - t)
    return best*1e3
print(f"{sys.argv[1]} plain {run(link):.1f} ms  contended {run(clink):.1f} ms")

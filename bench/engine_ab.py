"""The engine alone, old code against new: the minimum CPU time of 15 repeats of four plans.

    python bench/engine_ab.py new                             # in this checkout
    (cd OLD_CHECKOUT && python /path/to/bench/engine_ab.py old)

transformer-xl (435 tensors) over eth-100g, 2 ranks, plans naive, overlap, ddp 5 MB and
bucketed 5 MB, without and with contention (compute x1.3, comm x1.5: the interrupt path).
The minimum of CPU time is the steadiest figure on a shared box; run old and new in turn.
"""
import sys
import time

from simddp import build_profile, get_link, make_strategy, parse_model, plan
from simddp.inputs.contention import Contention
from simddp.inputs.resolved import Inputs
from simddp.sim.engine import simulate

p = build_profile(parse_model("transformer-xl"))
link = get_link("eth-100g")
plain = Inputs(p, link, 2)
contended = Inputs(p, link, 2, contention=Contention(1.3, 1.5, source="given"))
plans = [plan(p, make_strategy(n, 5)) for n in ("naive", "overlap", "ddp", "bucketed")]


def run(inputs: Inputs) -> float:
    best = 1e9
    for _ in range(15):
        t = time.process_time()
        for pl in plans:
            simulate(pl, inputs, record=False)
        best = min(best, time.process_time() - t)
    return best * 1e3


print(f"{sys.argv[1]} plain {run(plain):.1f} ms  contended {run(contended):.1f} ms")

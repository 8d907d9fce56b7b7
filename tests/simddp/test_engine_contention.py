"""The SimPy engine under contention, on test_engine.py's toy and hand-computed timelines:
compute ×2 slower while a collective runs, the collective ×1.5 while compute runs."""
from __future__ import annotations

import pytest

from simddp.analytic.closed_form import closed_form_step_s
from simddp.sim.engine import simulate
from simddp.inputs.contention import Contention
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.planning.plans import plan
from simddp.inputs.profile import Layer, ModelProfile
from simddp.planning.strategy import MB, STRATEGIES, make_strategy
from simddp.predict.resolve import resolve
from tests.simddp.test_engine import COMPUTE_LANE, TOY, run, step_ms, timeline, unit_link

CONTENDED = LinkFile(unit_link(), Contention(2.0, 1.5, source="link"))


def test_contended_overlap_by_hand():
    # At 5 tensor 2's 1 ms all-reduce and l1's 2 ms backward start together. Both busy: comm
    # runs at 1/1.5 (done at 5 + 1.5 = 6.5), compute at 1/2 (0.75 ms of work by 6.5), then
    # alone: 1.25 ms more -> l1 ends 7.75. Same again from 7.75: tensor 1 7.75–9.25, l0 ends
    # 10.5. Tensor 0 then runs alone: 10.5–11.5.
    r = run("overlap", CONTENDED)
    assert timeline(r) == [
        ("compute", "forward", 0.0, 3.0), ("compute", "l2 bwd", 3.0, 5.0),
        ("compute", "l1 bwd", 5.0, 7.75), ("compute", "l0 bwd", 7.75, 10.5),
        ("comm", "grad2", 5.0, 6.5), ("comm", "grad1", 7.75, 9.25),
        ("comm", "grad0", 10.5, 11.5)]
    assert step_ms(r) == 11.5


def test_contention_costs_exactly_the_overlapped_share():
    # A 1 ms collective fully inside a backward stretches to 1.5 ms, during which compute gets
    # half speed: it loses 1.5 × (1 − 1/2) = 0.75 ms. overlap hides two: +1.5 ms exactly.
    plain, contended = run("overlap"), run("overlap", CONTENDED)
    assert round((contended.step_s - plain.step_s) * 1e3, 9) == 2 * 1.5 * (1 - 1 / 2)
    # naive never runs both lanes at once: contention costs nothing, to the nanosecond.
    assert timeline(run("naive", CONTENDED)) == timeline(run("naive"))
    assert timeline(run("flat", CONTENDED)) == timeline(run("flat"))
    # ddp: bucket0 5–6.5 inside l1 (ends 7.75 as above); l0 7.75–9.75 alone; bucket1 alone
    # 9.75–11.75. One overlapped collective: +0.75 ms.
    ddp = run("ddp", CONTENDED)
    assert timeline(ddp)[-2:] == [("comm", "bucket0", 5.0, 6.5), ("comm", "bucket1", 9.75, 11.75)]
    assert round((ddp.step_s - run("ddp").step_s) * 1e3, 9) == 0.75


def test_contended_collective_outlasting_the_backward():
    # 2 layers: l1 holds a 6 MiB gradient (2 ms bwd), l0 a 1 MiB one (3 ms bwd).
    # forward 0–2, l1 bwd 2–4. From 4 both lanes busy: l0's 3 ms of backward at 1/2 speed ends
    # at 10; by then the 6 ms collective did 6 × 2/3 = 4 ms of work, the last 2 ms run at full
    # speed: 10–12. Tensor 0 (ready at 10) waits for the link: 12–13. Uncontended: 11 ms.
    model = ModelProfile("m", (Layer("l0", (MB,), 1e-3, 3e-3), Layer("l1", (6 * MB,), 1e-3, 2e-3)))
    r = run("overlap", CONTENDED, profile=model)
    assert timeline(r) == [
        ("compute", "forward", 0.0, 2.0), ("compute", "l1 bwd", 2.0, 4.0),
        ("compute", "l0 bwd", 4.0, 10.0),
        ("comm", "grad1", 4.0, 12.0), ("comm", "grad0", 12.0, 13.0)]
    assert (step_ms(r), step_ms(run("overlap", profile=model))) == (13.0, 11.0)


def test_collective_ending_as_compute_switches_layers():
    # Regression: only the collective slows (×2). ddp's bucket0 (1 ms of work) runs 5–7 at half
    # speed and ends exactly when l1 ends and l0 starts; bucket1 is not ready until 9. Two
    # compute flips at 7 once sent two interrupts, the second landing while comm waited for
    # bucket1 (an uncaught simpy.Interrupt). The delay had slack: the step stays 11 ms.
    r = run("ddp", LinkFile(unit_link(), Contention(1.0, 2.0, source="link")))
    assert timeline(r) == COMPUTE_LANE + [
        ("comm", "bucket0", 5.0, 7.0), ("comm", "bucket1", 9.0, 11.0)]
    assert step_ms(r) == 11.0


def test_closed_form_refuses_a_contended_link_or_host_costs():
    with pytest.raises(ValueError, match="neither contention, host costs"):
        closed_form_step_s(plan(TOY, make_strategy("overlap")), resolve(TOY, CONTENDED, 2))
    copying = Host("box", {"realrun": HostCosts(copy_gbps=4.0)})
    free_link = Link("free", alpha_s=0.0, busbw_gbps=1.0)
    with pytest.raises(ValueError, match="neither contention, host costs"):
        closed_form_step_s(plan(TOY, make_strategy("overlap")),
                           resolve(TOY, free_link, 2, host=copying))
    # torch's costs were not given: ddp runs free, so the closed form applies
    ddp = plan(TOY, make_strategy("ddp", 1))
    copied = resolve(TOY, free_link, 2, host=copying)
    assert closed_form_step_s(ddp, copied) == pytest.approx(
        simulate(ddp, copied).step_s, abs=1e-12)


def test_a_model_without_gradients_is_compute_only():
    frozen = ModelProfile("frozen", (Layer("l0", (), 1e-3, 2e-3), Layer("l1", (), 1e-3, 2e-3)),
                          optimizer_s=1e-3)
    for name in STRATEGIES:
        r = run(name, CONTENDED, profile=frozen, accum_steps=2)
        assert step_ms(r) == 2 * 6.0 + 1.0 and r.collectives == 0 and r.exposed_comm_s == 0


def test_slowdowns_of_exactly_one_are_no_contention_at_all():
    p = plan(TOY, make_strategy("overlap"))
    same = LinkFile(Link("unit", 0.0, MB / 1e6), Contention(1.0, 1.0, source="link"))
    assert timeline(simulate(p, resolve(TOY, same, 2))) == timeline(
        simulate(p, resolve(TOY, unit_link(), 2)))

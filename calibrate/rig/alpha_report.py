"""What calibrate's report says about the link's line when the sequence step ran: where its
two αs come from (overlapped and waited-for), how sure each is, the queue's α it did not use,
then the busbw refitted under α and how that line is judged::

    print_alphas(world, world.sequence, world.fit, world.heldout)   # calibrate.report does

The law: docs/FINDINGS.md#lone-alpha; the judged figures: calibrate/judged.py.
"""
from __future__ import annotations

from calibrate.fit import MAX_BUSBW_GBPS
from calibrate.nccl_table import human_bytes
from calibrate.rig.lone_alpha import alpha_unresolved
from calibrate.spreads import alpha_uncertainty


def busbw_text(f) -> str:
    """'busbw = 0.657 GB/s [0.613, 0.937]' (its rerun interval), or unresolved at the bound."""
    lo, hi = f.busbw_ci_gbps
    return (f"busbw = {f.busbw_gbps:.3f} GB/s [{lo:.3f}, {hi:.3f}]"
            if f.busbw_gbps < MAX_BUSBW_GBPS / 2 else
            "busbw unresolved (time flat in size: latency-bound)")


def _spread(spread: tuple[float, float] | None) -> str:
    return "not measured" if spread is None else f"x{spread[0]:.2f}–x{spread[1]:.2f}"


def print_alphas(run, seq: dict, fit, held: dict) -> None:
    """Where the link's two αs come from (docs/FINDINGS.md#lone-alpha), and the queue
    figure kept for comparison."""
    print(f"α of overlapped all-reduces: {seq['alpha_s'] * 1e6:.0f} µs, a small all-reduce's "
          f"lone time less its bytes (median over {seq['alpha_from']}; a step's queued "
          "all-reduces complete one every lone α + bytes/busbw)")
    uncertainty = alpha_uncertainty(seq)
    if seq.get("alpha_interval_s"):
        low, high = seq["alpha_interval_s"]
        print(f"  the median's p5–p95 over bootstrap resamples: {low * 1e6:.0f}–"
              f"{high * 1e6:.0f} µs" + (" (unresolved: α from the fast mode; see the warning)"
                 if alpha_unresolved(seq) else ""))
    if seq.get("sweep_small_alpha_s") is not None:
        print(f"  the sweep's sizes up to 64 KiB alone gave {seq['sweep_small_alpha_s'] * 1e6:.0f}"
              " µs (measured in one stretch of seconds, which a slow stretch can cover)")
    if seq.get("alpha_spread"):
        print(f"  what it was taken from spread x{seq['alpha_spread'][0]:.2f}–"
              f"x{seq['alpha_spread'][1]:.2f} of it (one call's jitter, not a step's)")
    if uncertainty:
        print(f"  the link's time_spread covers α x{uncertainty[0]:.2f}–x{uncertainty[1]:.2f}, "
              "so the prediction ranges do: "
              f"x{run.link.time_spread[0]:.2f}–x{run.link.time_spread[1]:.2f} (large "
              "all-reduces alone: " + _spread(seq.get("bandwidth_spread")) + ")")
    print(f"α of blocking all-reduces (naive, flat): {seq['blocking_alpha_s'] * 1e6:.0f} µs, "
          f"from {seq['count']} ({human_bytes(seq['bytes'])} in all) each waited for after 20 "
          f"ms of compute, mean of {seq['repeats']} (each its slowest rank): "
          f"{seq['blocking_s'] * 1e3:.2f} ms")
    if seq.get("idle_wake_s") is not None:   # the first call after compute, apart
        print(f"  the first of them took {seq['blocking_first_s'] * 1e3:.2f} ms on average: "
              f"{seq['idle_wake_s'] * 1e3:.2f} ms over its law, what a step's first collective "
              "after compute waits for Gloo's threads to wake (idle_wake_s)")
    if seq.get("blocking_call_median_s") is not None:   # each call after the first, clocked
        print(f"  one by one: median {seq['blocking_call_median_s'] * 1e6:.0f} µs, mean "
              f"{seq['blocking_call_mean_s'] * 1e6:.0f} µs a call (a few wait a scheduler "
              "tick; a step adds up the mean)" + (
                  f"; each hand-off refills the link's bucket by "
                  f"{seq['blocking_refill_s'] * 1e6:.0f} µs on average (a call's α, capped "
                  "at the burst: blocking_refill_s)" if "blocking_refill_s" in seq else ""))
    bucket_s = seq["bandwidth_s"] - seq.get("blocking_bytes_s", seq["bandwidth_s"])
    if bucket_s > 0:
        print(f"  its bytes: {seq['bandwidth_s'] * 1e3:.2f} ms at busbw, of which the link's "
              f"bucket served {bucket_s * 1e3:.2f} (refilled during each call's hand-off, as "
              f"simddp charges a chain): {seq['blocking_bytes_s'] * 1e3:.2f} ms taken out")
    if seq.get("blocking_alpha_spread"):
        low, high = seq["blocking_alpha_spread"]
        print(f"  per repeat (slowest rank): p5–p95 x{low:.2f}–x{high:.2f} of the mean over "
              f"{seq['repeats']} repeats; the link's time_spread covers it too")
    if seq.get("queued_alpha_s") is not None and seq["queued_alpha_s"] != seq["alpha_s"]:
        print(f"  not used: the same {seq['count']} queued at once {seq['async_s'] * 1e3:.2f} "
              f"ms -> {seq['queued_alpha_s'] * 1e6:.0f} µs each; a queue's fixed start, spread "
              "over its all-reduces, would be charged to every one of a step's")
    print(f"link file uses: α {run.link.alpha_s * 1e6:.0f} µs (overlapped), blocking "
          f"{seq['blocking_alpha_s'] * 1e6:.0f} µs; the lone fit's intercept was "
          f"{seq['lone_alpha_s'] * 1e6:.0f} µs; busbw {busbw_text(fit).split('busbw = ')[-1]}, " + (
              f"from {held['busbw_from']}" if held.get("busbw_from") else
              "refitted with that α held (the large sizes decide it)"))
    print("  " + judged_line(held))


def judged_line(held: dict) -> str:
    """The link line's R² and held-out errors on the sizes it is judged on, as its warnings
    read them (calibrate/judged.py)."""
    r2 = held["r2_log"]
    text = (f"judged on {held['judged_on']} (bandwidth-bound, where this line makes its "
            "claim): R² (log t) "
            + (f"{r2:.4f}" if r2 == r2 else "not scored (fewer than 3 such sizes)"))
    n = len(held["heldout_bytes"])
    if not n:
        return text + "; no held-out size among them"
    return (text + f"; held-out {n} size{'s' if n > 1 else ''}: median error {held['median_rel_err']:.1%}, "
            f"max {held['max_rel_err']:.1%}")

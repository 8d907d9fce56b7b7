"""Calibrate simddp's link model on real ranks: all-reduce sweep, α–β fit, contention.

    python -m calibrate --out cal                  # 2 local Gloo ranks -> cal/link.json
    python -m simddp sweep --link cal/link.json    # simulate with the measured link

Modules: bench (the sweep, on ranks), contention (compute vs comm slowdown, on ranks),
fit (α–β and piecewise least squares, pure numpy/scipy), report (table, CSV, JSON, plots),
cli (flags, validation, orchestration). See docs/CALIBRATE.md.
"""

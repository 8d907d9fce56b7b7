"""Back-of-the-envelope accounting: memory per device and the closed-form optimal bucket.

:mod:`~simddp.analytic.memory` — parameters, gradients, optimizer state and activations per
device, replicated and FSDP-sharded; :mod:`~simddp.analytic.optimal_bucket` — the α–β closed
form of bucketed overlap and its optimum. ``python -m simddp account`` prints both.
"""

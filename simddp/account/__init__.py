"""Back-of-the-envelope accounting: memory per device and the closed-form optimal bucket.

:mod:`~simddp.account.memory` — parameters, gradients, optimizer state and activations per
device, replicated and FSDP-sharded; :mod:`~simddp.account.optimal_bucket` — the α–β closed
form of bucketed overlap and its optimum. ``python -m simddp account`` prints both.
"""

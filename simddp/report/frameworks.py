"""The recommended bucket size in the user's own framework: Trainer, Accelerate, Lightning.

Each builds torch's DistributedDataParallel for the user, so a sweep row is reached through
what it passes on (docs/CLI.md, "In Hugging Face Trainer, Accelerate and PyTorch Lightning",
cites each library's page)::

    >>> print(framework_text(10.0, bucketed_step_s=0.0734))
    In Hugging Face Trainer: TrainingArguments(ddp_bucket_cap_mb=10, ddp_find_unused_parameters=False); in Accelerate: DistributedDataParallelKwargs(bucket_cap_mb=10); in PyTorch Lightning: DDPStrategy(bucket_cap_mb=10).
    All three pass bucket_cap_mb=10 to DistributedDataParallel, which on torch 2.13 makes the first bucket 10 MB too: the bucketed row's buckets at 10 MB (73.40 ms as realrun.DDP runs them); DDPStrategy passes any DDP keyword on, so DDPStrategy(bucket_cap_mb_list=[1, 10]) runs the ddp row. ddp_find_unused_parameters=False is torch's default, which the rows assume; Trainer turns it on unless gradient checkpointing is on.
"""
from __future__ import annotations

from simddp.report.table import fmt_mb, fmt_ms
from simddp.planning.registry import DDP_FIRST_BUCKET_MB
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB


def framework_calls(bucket_mb: float) -> list[str]:
    """The three calls that ask for ``bucket_mb`` (the torch line is torch_call_text's).

        >>> framework_calls(4.0)[2]
        'DDPStrategy(bucket_cap_mb=4)'
    """
    mb = fmt_mb(bucket_mb)
    return [f"TrainingArguments(ddp_bucket_cap_mb={mb}, ddp_find_unused_parameters=False)",
            f"DistributedDataParallelKwargs(bucket_cap_mb={mb})",
            f"DDPStrategy(bucket_cap_mb={mb})"]


def framework_text(bucket_mb: float, bucketed_step_s: float | None = None) -> str:
    """Two lines: the calls, then which torch argument each passes on and so which sweep row
    it runs. ``bucketed_step_s``: the bucketed row's step at ``bucket_mb`` where it was swept
    (what a plain bucket_cap_mb runs on torch 2.13)."""
    hf, acc, light = framework_calls(bucket_mb)
    mb, first = fmt_mb(bucket_mb), fmt_mb(DDP_FIRST_BUCKET_MB)
    calls = (f"In Hugging Face Trainer: {hf}; in Accelerate: {acc}; in PyTorch Lightning: "
             f"{light}.")
    unused = ("ddp_find_unused_parameters=False is torch's default, which the rows assume; "
              "Trainer turns it on unless gradient checkpointing is on.")
    if mb == first:  # first bucket = cap either way: one configuration
        return (f"{calls}\nAll three pass bucket_cap_mb={mb} to DistributedDataParallel: the "
                f"ddp rows at {mb} MB. {unused}")
    row = (f"the bucketed row's buckets at {mb} MB ("
           + ("not swept" if bucketed_step_s is None else
              f"{fmt_ms(bucketed_step_s)} ms as realrun.DDP runs them") + ")")
    lists = (f"DDPStrategy passes any DDP keyword on, so DDPStrategy(bucket_cap_mb_list="
             f"[{first}, {mb}]) runs the ddp row.")
    if mb == fmt_mb(DDP_DEFAULT_BUCKET_MB):  # Accelerate's default: left out, torch's rule
        return (f"{calls}\nTrainer and Accelerate leave bucket_cap_mb={mb} out (Accelerate's "
                f"default), so torch keeps its {first} MB first bucket: the ddp row. "
                f"DDPStrategy passes it on, which on torch 2.13 makes the first bucket {mb} MB "
                f"too: {row}; leave it out there, or pass bucket_cap_mb_list=[{first}, {mb}]. "
                f"{unused}")
    return (f"{calls}\nAll three pass bucket_cap_mb={mb} to DistributedDataParallel, which on "
            f"torch 2.13 makes the first bucket {mb} MB too: {row}; {lists} {unused}")

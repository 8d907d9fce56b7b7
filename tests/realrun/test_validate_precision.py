"""validate --precision bf16 measures fsdp and zero2 under FSDP2's mixed precision and predicts
them the same way (issue 52 item 5): its configurations carry the policy, which the bench
applies and the sweep reads (no processes)."""
from __future__ import annotations

from realrun.workflows.validate.settings import ValidateSettings


def test_validate_configs_carry_the_precision_to_fsdp_and_zero2_only():
    s = ValidateSettings(strategies=("ddp", "fsdp", "zero2"), bucket_mbs=(4,), precision="bf16")
    dtypes = {c["strategy"]: c.get("spec", {}).get("param_dtype") for c in s.configs()
              if isinstance(c.get("spec"), dict)}
    assert dtypes.get("fsdp") == "bf16" and dtypes.get("zero2") == "bf16"
    assert not dtypes.get("ddp:4")
    plain = ValidateSettings(strategies=("fsdp",), precision="fp32")
    assert all(not (c.get("spec") or {}).get("param_dtype") for c in plain.configs()
               if isinstance(c.get("spec"), dict))

"""The CPU test rig's physics: what Gloo on a shared CPU host adds to a step.

Imported only where a link file measured such a host (its ``gloo_host`` section): a sweep of
presets or of NCCL links never loads it (tests/simddp/test_rig_apart.py).
"""
from simddp.rig.gloo_shared_cpu import GlooOnSharedCpu

__all__ = ["GlooOnSharedCpu"]

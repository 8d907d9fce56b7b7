"""What calibrate measures for the CPU test rig alone: Gloo on a shared CPU host.

The α of a waited-for chain and the wake of its first call after compute (``sequence``, on the
ranks; ``chain_first``), a shaped link's token bucket through such a chain (``shaped_chain``),
the lone α's modes a scheduler tick makes (``lone_alpha``), and their report (``alpha_report``).
They become the link file's ``gloo_host`` section (simddp/inputs/gloo_host.py), which a
prediction hands to simddp/rig/. NCCL calibrations write no such section.
"""

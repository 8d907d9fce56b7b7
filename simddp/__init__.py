"""simddp: simulate data-parallel gradient synchronisation and pick the fastest strategy.

One plan, two executors: :func:`plan` says which gradients go into which all-reduce, ready
when, launched in what order; :func:`simulate` times it on a compute lane and a communication
lane (SimPy), and ``realrun.DDP`` runs the same plan on real ranks. :func:`resolve` decides a
prediction's inputs once, as every command does (the contention: measured, else the
published GPU figures where the compute runs on a GPU, else none)::

    >>> import simddp
    >>> profile = simddp.build_profile(simddp.parse_model("transformer-small"))  # A100 roofline
    >>> link = simddp.get_link("eth-100g")                     # or simddp.load_link_file("link.json")
    >>> p = simddp.plan(profile, simddp.make_strategy("ddp", bucket_mb=25))
    >>> inputs = simddp.resolve(profile, link, world_size=2)
    >>> len(p.collectives), round(simddp.simulate(p, inputs).step_ms, 2)
    (18, 96.8)
    >>> results = simddp.sweep(profile, link, 2, ["naive", "ddp"], [1, 10, 100])
    >>> simddp.recommend(results).bucket_mb
    10.0

The types (frozen dataclasses, JSON formats in docs/FORMATS.md): :class:`ModelProfile` of
:class:`Layer`\\ s (what a step computes), :class:`Link` (the network and collective library)
and :class:`LinkFile` (a link with what calibrate measured beside it), :class:`Host` of
:class:`HostCosts` (what each DDP implementation costs the host), :class:`Inputs` (one
prediction's, resolved), :class:`Strategy`, :class:`Plan` of :class:`Collective`\\ s,
:class:`Result` of :class:`Span`\\ s (predicted and measured alike). ``ls simddp`` shows the
rest by concept (docs/DESIGN.md). No torch anywhere: the simulator installs and runs in
seconds.
"""
import importlib

__version__ = "0.1.0"

# Exported name -> module that defines it. Imported on first use, so a command (python -m
# simddp sweep) loads only what it runs: not the comparison's numpy, nor matplotlib.
_LAZY = {
    "Comparison": "simddp.compare", "compare_results": "simddp.compare",
    "InputError": "simddp.errors",
    "Host": "simddp.inputs.host", "HostCosts": "simddp.inputs.host",
    "load_host": "simddp.inputs.io", "load_link": "simddp.inputs.io",
    "load_link_file": "simddp.inputs.io", "load_profile": "simddp.inputs.io",
    "profile_to_json": "simddp.inputs.io", "save_json": "simddp.inputs.io",
    "Link": "simddp.inputs.link", "LinkPiece": "simddp.inputs.link",
    "bus_factor": "simddp.inputs.link", "LinkFile": "simddp.inputs.link_file",
    "Layer": "simddp.inputs.profile", "ModelProfile": "simddp.inputs.profile",
    "Inputs": "simddp.inputs.resolved",
    "Collective": "simddp.planning.plans", "Plan": "simddp.planning.plans",
    "plan": "simddp.planning.plans",
    "STRATEGIES": "simddp.planning.strategy", "Strategy": "simddp.planning.strategy",
    "make_strategy": "simddp.planning.strategy",
    "closed_form_step_s": "simddp.predict.resolve", "resolve": "simddp.predict.resolve",
    "simulate": "simddp.predict.resolve",
    "Recommendation": "simddp.predict.recommend", "recommend": "simddp.predict.recommend",
    "sweep": "simddp.predict.sweep", "sweep_strategies": "simddp.predict.sweep",
    "build_profile": "simddp.presets", "get_link": "simddp.presets",
    "parse_model": "simddp.presets",
    "Result": "simddp.result", "Span": "simddp.result", "load_results": "simddp.result",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'simddp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

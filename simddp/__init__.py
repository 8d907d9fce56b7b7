"""simddp: simulate data-parallel gradient synchronisation and pick the fastest strategy.

One plan, two executors: :func:`plan` says which gradients go into which all-reduce, ready
when, launched in what order; :func:`simulate` times it on a compute lane and an α–β
communication lane (SimPy), and ``realrun.DDP`` runs the same plan on real ranks::

    >>> import simddp
    >>> profile = simddp.build_profile(simddp.parse_model("transformer-small"))  # A100 roofline
    >>> link = simddp.get_link("eth-100g")                     # or simddp.load_link("link.json")
    >>> p = simddp.plan(profile, simddp.make_strategy("ddp", bucket_mb=25))
    >>> len(p.collectives), round(simddp.simulate(profile, link, p, world_size=2).step_ms, 2)
    (18, 73.08)
    >>> results = simddp.sweep(profile, link, 2, ["naive", "ddp"], [1, 10, 100])
    >>> simddp.recommend(results).bucket_mb
    10.0

The types (frozen dataclasses, JSON formats in docs/FORMATS.md): :class:`ModelProfile` of
:class:`Layer`\\ s (what a step computes), :class:`Link` (the network and collective library),
:class:`Host` of :class:`HostCosts` (what each DDP implementation costs the host),
:class:`Strategy`, :class:`Plan` of :class:`Collective`\\ s, :class:`Result` of
:class:`Span`\\ s (predicted and measured alike). Subpackages: ``presets`` (models, devices,
links), ``account`` (memory, the closed-form optimal bucket), ``compare`` (predicted vs
measured), ``report`` (tables, traces, plots), ``commands`` (``python -m simddp``).
No torch anywhere: the simulator installs and runs in seconds.
"""
from simddp.analytic.closed_form import closed_form_step_s
from simddp.compare import Comparison, compare_results
from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.io import load_host, load_link, load_profile, profile_to_json, save_json
from simddp.result import load_results
from simddp.inputs.link import Link, LinkPiece, bus_factor
from simddp.planning.plans import Collective, Plan, plan
from simddp.presets import build_profile, get_link, parse_model
from simddp.inputs.profile import Layer, ModelProfile
from simddp.result import Result, Span
from simddp.planning.strategy import STRATEGIES, Strategy, make_strategy
from simddp.predict.sweep import Recommendation, recommend, sweep, sweep_strategies

__version__ = "0.1.0"
__all__ = ["Collective", "Comparison", "Host", "HostCosts", "InputError", "Layer", "Link",
           "LinkPiece", "ModelProfile", "Plan", "Recommendation", "Result", "STRATEGIES", "Span",
           "Strategy", "build_profile", "bus_factor", "closed_form_step_s", "compare_results",
           "get_link", "load_host", "load_link", "load_profile", "load_results",
           "make_strategy", "parse_model", "plan", "profile_to_json", "recommend", "save_json",
           "simulate", "sweep", "sweep_strategies"]

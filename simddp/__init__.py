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
from simddp.compare import Comparison, compare_results
from simddp.errors import InputError
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.io import (load_host, load_link, load_link_file, load_profile, profile_to_json,
                              save_json)
from simddp.inputs.link import Link, LinkPiece, bus_factor
from simddp.inputs.link_file import LinkFile
from simddp.inputs.profile import Layer, ModelProfile
from simddp.inputs.resolved import Inputs
from simddp.planning.plans import Collective, Plan, plan
from simddp.planning.strategy import STRATEGIES, Strategy, make_strategy
from simddp.predict.resolve import closed_form_step_s, resolve, simulate
from simddp.predict.sweep import sweep, sweep_strategies
from simddp.predict.recommend import Recommendation, recommend
from simddp.presets import build_profile, get_link, parse_model
from simddp.result import Result, Span, load_results

__version__ = "0.1.0"
__all__ = ["Collective", "Comparison", "Host", "HostCosts", "Inputs", "InputError", "Layer",
           "Link", "LinkFile", "LinkPiece", "ModelProfile", "Plan", "Recommendation", "Result",
           "STRATEGIES", "Span", "Strategy", "build_profile", "bus_factor", "closed_form_step_s",
           "compare_results", "get_link", "load_host", "load_link", "load_link_file",
           "load_profile", "load_results", "make_strategy", "parse_model", "plan",
           "profile_to_json", "recommend", "resolve", "save_json", "simulate", "sweep",
           "sweep_strategies"]

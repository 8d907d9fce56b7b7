"""The one function that resolves a prediction's inputs: which contention, which host effects.

The API, every command and realrun's workflows call :func:`resolve`, so the same job gives
the same step by any door. The contention a step runs under, in order:

1. the user's choice, where given (``contention``: "none", "published", or (compute, comm));
2. a measurement: the model's own (a profile's ``host_costs.contention``), else calibrate's
   (a link file's ``contention``);
3. where the profile's compute runs on a GPU, the published GPU figures
   (docs/FINDINGS.md#gpu-contention-under-overlap);
4. none: a CPU host, whose contention is Gloo's and which calibrate measures.

A link file's ``gloo_host`` section also puts that host's effects in the inputs (simddp/rig/,
imported only then)::

    >>> from simddp import build_profile, get_link, parse_model
    >>> inputs = resolve(build_profile(parse_model("transformer-small")), get_link("eth-100g"))
    >>> inputs.contention.source, inputs.contention.factors, inputs.effects
    ('published', (1.189, 2.22), None)
    >>> resolve(build_profile(parse_model("mlp-4x1024"), "cpu"), get_link("eth-100g")).contention.source
    ''
    >>> resolve(build_profile(parse_model("mlp-4x1024")), get_link("eth-100g"),
    ...         contention=(1.1, 1.3)).contention
    Contention(compute=1.1, comm=1.3, spread=None, source='given')
"""
from __future__ import annotations

import os

from simddp.errors import InputError
from simddp.inputs.contention import Contention, check_factors, published_gpu
from simddp.inputs.host import Host
from simddp.inputs.io import load_host, load_link_file, load_profile
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.inputs.profile import ModelProfile
from simddp.inputs.resolved import NONE, Inputs
from simddp.inputs.topology import Topology
from simddp.presets.devices import DEVICES

# What ``contention`` may name, besides (compute, comm) factors.
CHOICES = ("none", "published")
# Device presets that are not GPUs (simddp/presets/devices.py): every other preset is one.
NOT_GPU_PRESETS = ("cpu",)


def computes_on_gpu(device: str | None) -> bool:
    """Whether ``device`` names a GPU: a device preset other than cpu, or "cuda" / "cuda:N"
    as ``realrun profile`` and ``trace-import`` record it::

        >>> [computes_on_gpu(d) for d in ("a100", "cuda:0", "cuda", "cpu", None, "mps")]
        [True, True, True, False, False, False]
    """
    if not isinstance(device, str):
        return False
    name = device.split(":")[0].strip().lower()
    return name == "cuda" or (name in DEVICES and name not in NOT_GPU_PRESETS)


def measured_contention(link_file: LinkFile, host: Host | None) -> Contention | None:
    """The contention a measurement set: the model's own, else calibrate's; None: neither."""
    own = None if host is None else host.measured_contention
    return own if own is not None else link_file.contention


def choose_contention(link_file: LinkFile, host: Host | None, device: str | None,
                      choice=None) -> Contention:
    """The contention a prediction runs under (see the module text)."""
    if choice is not None:
        return given_contention(choice)
    measured = measured_contention(link_file, host)
    if measured is not None:
        return measured
    return published_gpu() if computes_on_gpu(device) else NONE


def given_contention(choice) -> Contention:
    """The user's choice: "none", "published" or (compute, comm) factors, each >= 1; held
    there by the prediction ranges, and never called measured::

        >>> given_contention("none"), given_contention("published").source
        (Contention(compute=1.0, comm=1.0, spread=None, source='given'), 'published')
    """
    if isinstance(choice, Contention):
        return choice
    if choice == "none":
        return Contention(source="given")
    if choice == "published":
        return published_gpu()
    if isinstance(choice, str):
        raise InputError(f"--contention: {choice!r} is none of {', '.join(CHOICES)} or "
                         "COMPUTE,COMM factors (e.g. 1.2,2.0)")
    return Contention(*check_factors("--contention", "COMPUTE,COMM", choice), source="given")


def resolve(profile: ModelProfile | str | os.PathLike,
            link: Link | LinkFile | str | os.PathLike, world_size: int = 2, *,
            host: Host | str | os.PathLike | None = None, topology: Topology | None = None,
            contention=None) -> Inputs:
    """One scenario's :class:`~simddp.inputs.resolved.Inputs`, resolved once. ``profile``
    and ``link`` may be files (a profile file brings its host costs unless ``host`` is
    given); with ``topology``, ``link`` is the link between nodes; ``contention`` None: the
    rule above."""
    if not isinstance(profile, ModelProfile):
        path = profile
        profile = load_profile(path)
        if host is None:
            host = load_host(path)
    if not isinstance(host, (Host, type(None))):
        host = load_host(host)
    link_file = as_link_file(link if isinstance(link, (Link, LinkFile)) else load_link_file(link))
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise InputError(f"--world-size must be an integer >= 1, got {world_size!r}")
    chosen = choose_contention(link_file, host, profile.device, contention)
    return Inputs(profile, link_file.link, world_size, chosen, host, topology,
                  host_effects(link_file, topology))


def host_effects(link_file: LinkFile, topology: Topology | None):
    """What Gloo on a shared CPU host adds (simddp/rig/), where a link file measured it;
    None otherwise, without importing the rig."""
    levels = topology is not None and (topology.intra_host is not None
                                       or topology.inter_host is not None)
    if link_file.host is None and not levels:
        return None
    from simddp.inputs.gloo_host import GlooHost
    from simddp.rig import GlooOnSharedCpu

    bytes_factor = None if link_file.contention is None else link_file.contention.comm
    return GlooOnSharedCpu(link_file.host or GlooHost(), bytes_factor)


def simulate(*args, record: bool = True, stats: dict | None = None, **given):
    """One step of a plan: ``simulate(plan, inputs)`` on resolved inputs, or
    ``simulate(profile, link, plan, world_size=2, host=…, topology=…, contention=…)``, which
    resolves them first, as every command does (:func:`resolve`)::

        >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
        >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
        >>> p = plan(toy, make_strategy("overlap"))
        >>> simulate(p, resolve(toy, Link("l", 0.0, 1.0))).step_ms == simulate(
        ...     toy, Link("l", 0.0, 1.0), p, 2).step_ms
        True
    """
    from simddp.sim.engine import simulate as run

    plan, inputs = _plan_and_inputs(args, given)
    return run(plan, inputs, record=record, stats=stats)


def closed_form_step_s(*args, **given) -> float:
    """The same step by the recurrence of simddp/analytic/closed_form.py: ``(plan, inputs)``,
    or ``(profile, link, plan, world_size=2, host=…)`` as :func:`simulate` takes them."""
    from simddp.analytic.closed_form import closed_form_step_s as recurrence

    return recurrence(*_plan_and_inputs(args, given))


def _plan_and_inputs(args: tuple, given: dict):
    if len(args) == 2 and isinstance(args[1], Inputs) and not given:
        return args
    if len(args) < 3:
        raise TypeError("expected (plan, inputs) or (profile, link, plan[, world_size])")
    profile, link, plan, *rest = args
    world_size = rest[0] if rest else given.pop("world_size", 2)
    return plan, resolve(profile, link, world_size, **given)

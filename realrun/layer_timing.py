"""Per-layer forward and backward seconds of any torch module, as a simddp ModelProfile.

One process, no communication: warm-up steps, then ``repeats`` timed steps with hooks::

    profile, measured = profile_module(model, inputs, loss_fn, repeats=10, name="mine")
    save_json("profile.json", {**profile_to_json(profile), "measured": measured})
    # python -m simddp sweep --model profile.json

Layers are the modules that directly own trainable parameters ("(root)" for the model's
own), their tensor ids realrun.DDP's (realrun/tensors.py). A layer's forward ends at its forward
hook, its backward at its last ``post_accumulate_grad`` hook (the measured ready order); layers
are listed in the reverse of their backward's end, and each is charged from the previous end
to its own, so the layers sum to the whole pass (docs/REALRUN.md, python -m realrun profile).
On CUDA the hooks record events, read after the step, so they never serialise the GPU.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from statistics import median

import torch

from realrun.precision import autocast, check_precision, set_precision
from realrun.steps import make_optimizer
from realrun.tensors import trainable_parameters
from realrun.workload import forward as run_forward
from realrun.workload import loss_of
from simddp.errors import InputError
from simddp.inputs.profile import Layer, ModelProfile


class Clock:
    """Time marks in hooks: a float on CPU, a recorded CUDA event on GPU, read after the step."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self.start = None

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def begin(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        self.start = self.mark()

    def seconds(self, mark) -> float:
        """Seconds from :meth:`begin` to ``mark``; call after :meth:`end`."""
        if not self.cuda:
            return mark - self.start
        return self.start.elapsed_time(mark) / 1e3

    def end(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)


def attribute(ends: list[float | None], start_s: float, stop_s: float) -> list[float]:
    """Seconds per layer: from the previous end (in time order) to its own end; the tail
    after the last end goes to the last layer. Layers with no end get 0.

    >>> attribute([3.0, 1.0, None], start_s=0.0, stop_s=4.0)
    [3.0, 1.0, 0.0]
    """
    seconds = [0.0] * len(ends)
    order = sorted((t, i) for i, t in enumerate(ends) if t is not None)
    previous = start_s
    for t, i in order:
        seconds[i] = t - previous
        previous = t
    if order:
        seconds[order[-1][1]] += stop_s - previous
    return seconds


def owners(model: torch.nn.Module) -> dict[str, list[tuple[str, torch.nn.Parameter]]]:
    """Owning module name -> its trainable parameters, both in ``parameters()`` order."""
    out: dict[str, list] = {}
    for name, p in trainable_parameters(model):
        out.setdefault(name.rpartition(".")[0] or "(root)", []).append((name, p))
    return out


def profile_module(model: torch.nn.Module, inputs, loss_fn=None, *, repeats: int = 10,
                   warmup: int = 3, device: str | torch.device = "cpu",
                   optimizer: str = "sgd", precision: str = "fp32",
                   name: str | None = None) -> tuple[ModelProfile, dict]:
    """(profile named ``name``, what was measured and how) of ``model`` on ``inputs``.

    ``model`` and ``inputs`` must already be on ``device``; ``loss_fn`` as in
    realrun/workload.py. Raises InputError if the model has no trainable parameters.
    """
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    dev = torch.device(device)
    set_precision(check_precision(precision))
    layer_params = owners(model)
    if not layer_params:
        raise InputError(f"model {type(model).__name__} has no trainable parameters")
    clock = Clock(dev)
    hooks = _Hooks(model, layer_params, clock)
    opt = make_optimizer(optimizer, [p for ps in layer_params.values() for _, p in ps])
    step = _Step(model, inputs, loss_fn, opt, clock, precision, dev)
    timed = _hooked_steps(step, hooks, warmup, repeats)
    plain = [step.plain() for _ in range(repeats)]
    layers, ready_order = _layers_in_replay_order(model, layer_params, timed)
    profile = ModelProfile(name or type(model).__name__, layers, median(timed["optimizer_s"]),
                           ready_order, device=str(dev))
    measured = {
        "repeats": repeats, "warmup": warmup, "optimizer": optimizer, "device": str(dev),
        "precision": precision, "threads": torch.get_num_threads(), "torch": torch.__version__,
        "clock": "cuda events" if clock.cuda else "perf_counter",
        "forward_s_hooked": median(sum(r) for r in timed["forward"]),
        "backward_s_hooked": median(sum(r) for r in timed["backward"]),
        "forward_s_unhooked": median(p[0] for p in plain),
        "backward_s_unhooked": median(p[1] for p in plain),
        "ready_order_stable": len(set(timed["orders"])) == 1,
        "unused_parameters": [pn for pn, _ in (p for ps in layer_params.values() for p in ps)
                              if pn not in set(timed["orders"][-1])],
        "attribution": "gap before a layer's end goes to that layer; tail to the last layer",
    }
    return profile, measured


class _Hooks:
    """The profile's hooks on ``model``, one step's marks at a time: when each layer's forward
    ended (``fwd_end``), when its last gradient became ready (``bwd_end``), and the parameter
    names in the order their gradients became ready (``ready``)."""

    def __init__(self, model: torch.nn.Module, layer_params: dict, clock: Clock) -> None:
        names = list(layer_params)
        index = {n: i for i, n in enumerate(names)}
        self.fwd_end: list = [None] * len(names)
        self.bwd_end: list = [None] * len(names)
        self.ready: list[str] = []
        self.handles = []
        for owner in names:
            module = model if owner == "(root)" else model.get_submodule(owner)
            self.handles.append(module.register_forward_hook(
                _forward_hook(self.fwd_end, index[owner], clock)))
        for owner, ps in layer_params.items():
            for pn, p in ps:
                self.handles.append(p.register_post_accumulate_grad_hook(
                    _grad_hook(self.bwd_end, index[owner], self.ready, pn, clock)))

    def reset(self) -> None:
        self.fwd_end[:] = self.bwd_end[:] = [None] * len(self.fwd_end)
        self.ready.clear()

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


@dataclass(frozen=True)
class _Step:
    """One training step of ``model`` on ``inputs``, timed by ``clock``."""

    model: torch.nn.Module
    inputs: object
    loss_fn: object
    opt: torch.optim.Optimizer
    clock: Clock
    precision: str
    device: torch.device

    def hooked(self, hooks: _Hooks) -> tuple:
        """(forward ends, backward ends per layer, the forward's, backward's and optimizer's
        ends) in seconds from the step's start, with ``hooks`` recording."""
        hooks.reset()
        t1, t2, t3 = self._marks()
        sec = self.clock.seconds
        return ([None if m is None else sec(m) for m in hooks.fwd_end],
                [None if m is None else sec(m) for m in hooks.bwd_end], sec(t1), sec(t2), sec(t3))

    def plain(self) -> tuple[float, float]:
        """(forward, backward) seconds of one step without hooks: the hook overhead reference."""
        t1, t2, _ = self._marks()
        return self.clock.seconds(t1), self.clock.seconds(t2) - self.clock.seconds(t1)

    def _marks(self) -> tuple:
        """One step; the clock's marks at the end of its forward, backward and optimizer."""
        self.opt.zero_grad(set_to_none=True)
        self.clock.begin()
        with autocast(self.precision, self.device):
            loss = loss_of(run_forward(self.model, self.inputs), self.loss_fn)
        t1 = self.clock.mark()
        loss.backward()
        t2 = self.clock.mark()
        self.opt.step()
        t3 = self.clock.mark()
        self.clock.end()
        return t1, t2, t3


def _hooked_steps(step: _Step, hooks: _Hooks, warmup: int, repeats: int) -> dict[str, list]:
    """``warmup`` untimed, then ``repeats`` timed steps with the hooks on (removed after): per
    step each layer's seconds (:func:`attribute`), backward ends, optimizer seconds, ready order."""
    timed: dict[str, list] = {"forward": [], "backward": [], "bwd_ends": [],
                              "optimizer_s": [], "orders": []}
    try:
        for i in range(warmup + repeats):
            f_end, b_end, t1, t2, t3 = step.hooked(hooks)
            if i < warmup:
                continue
            timed["forward"].append(attribute(f_end, 0.0, t1))
            timed["backward"].append(attribute(b_end, t1, t2))
            timed["bwd_ends"].append(b_end)
            timed["optimizer_s"].append(t3 - t2)
            timed["orders"].append(tuple(hooks.ready))
    finally:
        hooks.remove()
    return timed


def _layers_in_replay_order(model: torch.nn.Module, layer_params: dict,
                            timed: dict[str, list]) -> tuple[tuple[Layer, ...], tuple[int, ...]]:
    """(the layers, reverse of backward completion: unused layers (no gradient) first, then by
    median end; the last timed step's gradient-ready order, unused tensors last)."""
    names = list(layer_params)

    def backward_end(j: int) -> float:
        ends = [e[j] for e in timed["bwd_ends"] if e[j] is not None]
        return median(ends) if ends else float("inf")
    order = sorted(range(len(names)), key=lambda j: (-backward_end(j), j))
    tensor_id = {pn: t for t, (pn, _) in enumerate(trainable_parameters(model))}
    layers = []
    for j in order:
        ps = layer_params[names[j]]
        layers.append(Layer(names[j], tuple(p.numel() * p.element_size() for _, p in ps),
                            median(r[j] for r in timed["forward"]),
                            median(r[j] for r in timed["backward"]),
                            tuple(pn for pn, _ in ps), tuple(tensor_id[pn] for pn, _ in ps)))
    ready_order = [tensor_id[pn] for pn in timed["orders"][-1]]
    ready_order += [t for t in range(len(tensor_id)) if t not in set(ready_order)]  # unused
    return tuple(layers), tuple(ready_order)


def _forward_hook(ends: list, layer: int, clock: Clock):
    def hook(_module, _inputs, _output) -> None:
        ends[layer] = clock.mark()  # the last call in a step counts
    return hook


def _grad_hook(ends: list, layer: int, ready: list, name: str, clock: Clock):
    def hook(_param) -> None:
        ends[layer] = clock.mark()  # ready in order, so the last one is the latest
        ready.append(name)
    return hook


def profile_workload(workload, *, seed: int = 0, rank: int = 0, on_built=None,
                     **kwargs) -> tuple[ModelProfile, dict]:
    """A Workload built on ``device`` and profiled; ``measured`` also says what was profiled.
    ``on_built(model)`` runs once the model is built, before its first step."""
    device = kwargs.get("device", "cpu")
    model, inputs, loss_fn = workload.build(seed, rank, device)
    if on_built is not None:
        on_built(model)
    profile, measured = profile_module(model, inputs, loss_fn, name=workload.name, **kwargs)
    measured.update(workload=workload.to_json(), seed=seed,
                    batch=workload.batch or None, seq=workload.seq or None)
    return profile, measured

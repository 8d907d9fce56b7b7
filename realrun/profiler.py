"""Per-layer forward and backward seconds of a real torch model, as a simddp ModelProfile.

One process, no communication: build the preset, run warm-up steps, then ``repeats`` timed
steps with hooks on every leaf module of ``spec.ops()``::

    profile, measured = profile_model(parse_model("mlp-8x1024"), batch=4, seq=8, repeats=10)
    save_json("profile.json", {**profile_to_json(profile), "measured": measured})
    # python -m simddp sweep --model profile.json

What is recorded per step (wall clock, ``perf_counter``; on CUDA each hook synchronizes first):

- forward: when each layer's forward hook fires (its forward ended);
- backward: when each of the layer's parameters' ``post_accumulate_grad`` hooks fires — the
  layer's backward "ends" when its last gradient is ready, which is the moment the simulator
  and a DDP wrapper care about. A parameter-free layer (``blocks.i.attn``) ends when the
  gradients w.r.t. its inputs exist (tensor hooks on q, k, v, registered in its forward hook).
  Module full-backward hooks are not used: on this kind of box they cost ~0.6 ms per module
  in forward (autograd wrappers around every input and output), and a module none of whose
  inputs need a gradient (the embedding, the first MLP layer) fires them before its own work;
- the gradient-ready order: parameter ids (index in ``list(model.parameters())``) in the order
  their post-accumulate-grad hooks fire — measured, not assumed (a SwiGLU's ``w3`` is ready
  before ``w1``, unlike reverse definition order);
- the optimizer step (``optimizer.step()``), SGD or Adam.

Attribution: a layer is charged from the end of the layer that ended before it (in execution
order) to its own end, so the unhooked work between layers — activations, residual adds, the
silu and product of SwiGLU, in backward also the input-gradient work of a composite op after
its weight gradient is accumulated (RMSNorm) — goes to the *next* layer to finish, and the
layers sum to the whole pass. Work after the last hook (the loss in forward; the tail of
backward) goes to the layer that finished last. Each layer's time is the median over
``repeats``. Forward hooks cost tens to hundreds of µs each (Python); the hook-free forward and
backward medians are recorded next to the profile (``measured``) so the overhead is visible.
"""
from __future__ import annotations

import time
from statistics import median

import torch

from realrun.steps import make_optimizer
from realrun.models import build_model, make_batch
from simddp.presets.models import ModelSpec
from simddp.profile import Layer, ModelProfile


class _Recorder:
    """Hook callbacks that stamp the clock; one instance per profiled model."""

    def __init__(self, n_layers: int, sync) -> None:
        self.n_layers = n_layers
        self.sync = sync
        self.reset()

    def reset(self) -> None:
        self.forward_end = [None] * self.n_layers
        self.backward_end = [None] * self.n_layers
        self.ready: list[int] = []

    def now(self) -> float:
        self.sync()
        return time.perf_counter()

    def on_forward(self, layer: int):
        def hook(_module, _inputs, _output) -> None:
            self.forward_end[layer] = self.now()
        return hook

    def on_forward_param_free(self, layer: int):
        """Forward end, plus tensor hooks on the inputs: they fire once the gradients w.r.t.
        the inputs exist, which is where a parameter-free layer's backward ends."""
        def hook(_module, inputs, _output) -> None:
            self.forward_end[layer] = self.now()
            for t in inputs:
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(lambda _grad: self._backward_mark(layer))
        return hook

    def on_grad_ready(self, param_id: int, layer: int):
        def hook(_param) -> None:
            self._backward_mark(layer)
            self.ready.append(param_id)
        return hook

    def _backward_mark(self, layer: int) -> None:
        t = self.now()
        previous = self.backward_end[layer]
        self.backward_end[layer] = t if previous is None else max(previous, t)


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


def profile_model(spec: ModelSpec, *, batch: int, seq: int, repeats: int = 10, warmup: int = 3,
                  optimizer: str = "sgd", device: str = "cpu",
                  seed: int = 0) -> tuple[ModelProfile, dict]:
    """(profile named ``spec.name``, what was measured and how) for ``spec`` at batch × seq."""
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    dev = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    torch.manual_seed(seed)
    model = build_model(spec).to(dev)
    inputs, target = (t.to(dev) for t in make_batch(spec, batch, seq, seed))
    opt = make_optimizer(optimizer, model.parameters())
    ops = spec.ops()
    params = list(model.named_parameters())
    owner_layer = {name: i for i, (name, _, _) in enumerate(ops)}
    rec = _Recorder(len(ops), sync)
    handles = []
    for i, (name, _, _) in enumerate(ops):
        module = model.get_submodule(name)
        has_params = any(True for _ in module.parameters())
        handles.append(module.register_forward_hook(
            rec.on_forward(i) if has_params else rec.on_forward_param_free(i)))
    for pid, (name, p) in enumerate(params):
        layer = owner_layer[name.rpartition(".")[0]]
        handles.append(p.register_post_accumulate_grad_hook(rec.on_grad_ready(pid, layer)))

    def step() -> tuple[float, float, float, float]:
        """Clock reads: start, forward done (loss included), backward done, optimizer done."""
        opt.zero_grad(set_to_none=True)
        rec.reset()
        t0 = rec.now()
        loss = model(inputs, target)
        t1 = rec.now()
        loss.backward()
        t2 = rec.now()
        opt.step()
        return t0, t1, t2, rec.now()

    forward, backward, optimizer_s, orders = [], [], [], []
    for i in range(warmup + repeats):
        t0, t1, t2, t3 = step()
        if i < warmup:
            continue
        missing = [ops[j][0] for j in range(len(ops))
                   if rec.forward_end[j] is None or rec.backward_end[j] is None]
        if missing:
            raise RuntimeError(f"layers {missing[:3]} ran no forward or backward; "
                               "the model does not match spec.ops()")
        forward.append(attribute(rec.forward_end, t0, t1))
        backward.append(attribute(rec.backward_end, t1, t2))
        optimizer_s.append(t3 - t2)
        orders.append(tuple(rec.ready))
    for handle in handles:
        handle.remove()
    plain = [_plain_pass(model, opt, inputs, target, rec.now) for _ in range(repeats)]

    layers = []
    for j, (name, _, _) in enumerate(ops):
        mine = [(n, p) for n, p in params if n.rpartition(".")[0] == name]
        layers.append(Layer(name, tuple(p.numel() * p.element_size() for _, p in mine),
                            median(r[j] for r in forward), median(r[j] for r in backward),
                            tuple(n for n, _ in mine)))
    profile = ModelProfile(spec.name, tuple(layers), median(optimizer_s), orders[-1])
    measured = {
        "batch": batch, "seq": seq, "repeats": repeats, "warmup": warmup,
        "optimizer": optimizer, "device": str(dev), "threads": torch.get_num_threads(),
        "seed": seed, "torch": torch.__version__,
        "forward_s_hooked": median(sum(r) for r in forward),
        "backward_s_hooked": median(sum(r) for r in backward),
        "forward_s_unhooked": median(p[0] for p in plain),
        "backward_s_unhooked": median(p[1] for p in plain),
        "ready_order_stable": len(set(orders)) == 1,
        "attribution": "gap before a layer's end goes to that layer; tail to the last layer",
    }
    return profile, measured


def _plain_pass(model, opt, inputs, target, now) -> tuple[float, float]:
    """(forward, backward) seconds of one step without hooks: the hook overhead reference."""
    opt.zero_grad(set_to_none=True)
    t0 = now()
    loss = model(inputs, target)
    t1 = now()
    loss.backward()
    t2 = now()
    opt.step()
    return t1 - t0, t2 - t1

"""simddp's model presets as torch modules: same parameter names, same order, same shapes.

A simulated and a measured run of "transformer-small[d_model=256,layers=2]" are about the same
model because both start from one :class:`simddp.presets.models.ModelSpec`::

    >>> from simddp.presets.models import parse_model
    >>> spec = parse_model("mlp-4x64")
    >>> model = build_model(spec)
    >>> [n for n, _ in model.named_parameters()] == [n for n, _ in spec.parameters()]
    True
    >>> inputs, target = make_batch(spec, batch=2, seq=8, seed=0)
    >>> loss = model(inputs, target)          # every model returns its scalar loss

The families (docs/REALRUN.md, Models): transformer (pre-norm blocks, causal attention,
SwiGLU, untied head; next-token cross-entropy), mlp (bias-free Linear + ReLU, Kaiming-normal so
deep stacks keep their scale instead of decaying into slow denormals) and ffn (residual
``x + down(relu(up(x)))`` blocks); mlp and ffn take MSE to a fixed random target. The attention
core is its own parameter-free module, ``blocks.i.attn``, so the profiler can time it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from simddp.presets.models import ModelSpec

RMS_EPS = 1e-6


def build_model(spec: ModelSpec) -> nn.Module:
    """A torch module whose ``named_parameters()`` equal ``spec.parameters()`` (names, shapes, order).

    Initialisation draws from torch's global RNG: call ``torch.manual_seed`` first for the same
    weights on every rank and in every configuration.
    """
    if spec.kind == "transformer":
        return Transformer(spec)
    if spec.kind == "mlp":
        return MLP(spec)
    if spec.kind == "ffn":
        return FFNStack(spec)
    raise ValueError(f"model {spec.name!r}: unknown kind {spec.kind!r}; expected transformer, mlp or ffn")


def make_batch(spec: ModelSpec, batch: int, seq: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, target) for ``model(inputs, target)``, the same for the same arguments.

    transformer: random token ids, inputs [B, S] and target = inputs shifted by one [B, S];
    mlp/ffn: inputs and target [B, S, d_model] from a standard normal. Built from a private
    ``torch.Generator`` seeded with ``seed``, so the global RNG is left alone.
    """
    for name, value in (("batch", batch), ("seq", seq)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    gen = torch.Generator().manual_seed(seed)
    if spec.kind == "transformer":
        tokens = torch.randint(0, spec.vocab, (batch, seq + 1), generator=gen)
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    inputs = torch.randn(batch, seq, spec.d_model, generator=gen)
    target = torch.randn(batch, seq, spec.d_model, generator=gen)
    return inputs, target


class Attention(nn.Module):
    """Causal multi-head attention core: softmax(QKᵀ/√d_head)·V; no parameters."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.heads = heads

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        b, s, d = q.shape

        def split(x: torch.Tensor) -> torch.Tensor:   # [B, S, D] -> [B, H, S, D/H]
            return x.view(b, s, self.heads, d // self.heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        return out.transpose(1, 2).reshape(b, s, d)


class Block(nn.Module):
    """Pre-norm transformer block; attributes in simddp's ``ops()`` order (that order is the
    parameter order)."""

    def __init__(self, d_model: int, d_ff: int, heads: int) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(d_model, eps=RMS_EPS)
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        self.attn = Attention(heads)
        self.o = nn.Linear(d_model, d_model, bias=False)
        self.ffn_norm = nn.RMSNorm(d_model, eps=RMS_EPS)
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.attn_norm(x)
        x = x + self.o(self.attn(self.q(h), self.k(h), self.v(h)))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Transformer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.embed = nn.Embedding(spec.vocab, spec.d_model)
        self.blocks = nn.ModuleList(Block(spec.d_model, spec.d_ff, spec.heads)
                                    for _ in range(spec.layers))
        self.norm = nn.RMSNorm(spec.d_model, eps=RMS_EPS)
        self.head = nn.Linear(spec.d_model, spec.vocab, bias=False)

    def forward(self, tokens: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), target.flatten())


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(spec.d_model, spec.d_model, bias=False)
                                    for _ in range(spec.layers))
        for layer in self.layers:
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.relu(layer(x))
        return F.mse_loss(x, target)


class FFNBlock(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.relu(self.up(x)))


class FFNStack(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(FFNBlock(spec.d_model, spec.d_ff) for _ in range(spec.layers))

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return F.mse_loss(x, target)

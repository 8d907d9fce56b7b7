"""A transformer as its config describes it: every parameter tensor, in forward order.

A Hugging Face ``config.json`` unrolled into the model's modules: the embeddings, each block,
then the final norm and the head (a tied LM head holds no tensor of its own)::

    >>> llama3 = Architecture("llama-3-8b", "llama", hidden=4096, layers=32, heads=32, ffn=14336,
    ...                       vocab=128256, max_positions=8192, kv_heads=8)
    >>> llama3.n_params, [op.name for op in llama3.modules()][:4]
    (8030261248, ['model.embed_tokens', 'model.layers.0.input_layernorm', 'model.layers.0.self_attn.q_proj', 'model.layers.0.self_attn.k_proj'])

:func:`simddp.presets.models.build_profile` times its modules by the presets' roofline; their
names are the ``family``'s own, so a simulated gradient has the name a trace of the real model
gives it.
"""
from __future__ import annotations

from dataclasses import dataclass

from simddp.errors import InputError
from simddp.presets.models import Op

MLPS = ("swiglu", "gelu")          # gated (gate, up, down) or plain (up, down)
NORMS = ("rmsnorm", "layernorm")   # a weight; a weight and a bias
POSITIONS = ("rope", "alibi", "learned")   # only learned ones hold a table
HEADS = ("lm", "none", "pooler", "mlm", "pretraining")


@dataclass(frozen=True)
class Names:
    """A family's module names; ``{i}`` is the block's index. The MLP lists (name, role)
    in the order the family defines its matrices."""

    embed: str
    positions: str
    types: str
    embed_norm: str
    block: str
    attn_norm: str
    q: str
    k: str
    v: str
    qkv: str
    attn: str
    o: str
    ffn_norm: str
    gated: tuple[tuple[str, str], ...]
    plain: tuple[tuple[str, str], ...]
    final_norm: str
    head: str


NAMES = {
    # simddp's own presets (simddp/presets/models.py): a preset and its spec name the same tensors
    "decoder": Names("embed", "pos_embed", "type_embed", "embed_norm", "blocks.{i}", "attn_norm",
                     "q", "k", "v", "qkv", "attn", "o", "ffn_norm",
                     (("w1", "gate"), ("w2", "down"), ("w3", "up")),
                     (("w1", "up"), ("w2", "down")), "norm", "head"),
    "gpt2": Names("transformer.wte", "transformer.wpe", "", "", "transformer.h.{i}", "ln_1",
                  "", "", "", "attn.c_attn", "attn", "attn.c_proj", "ln_2", (),
                  (("mlp.c_fc", "up"), ("mlp.c_proj", "down")), "transformer.ln_f", "lm_head"),
    "llama": Names("model.embed_tokens", "", "", "", "model.layers.{i}", "input_layernorm",
                   "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "",
                   "self_attn", "self_attn.o_proj", "post_attention_layernorm",
                   (("mlp.gate_proj", "gate"), ("mlp.up_proj", "up"), ("mlp.down_proj", "down")),
                   (), "model.norm", "lm_head"),
    # llm-foundry's MPTGLU adds its gate after MPTMLP's up and down
    "mpt": Names("transformer.wte", "transformer.wpe", "", "", "transformer.blocks.{i}",
                 "norm_1", "", "", "", "attn.Wqkv", "attn", "attn.out_proj", "norm_2",
                 (("ffn.up_proj", "up"), ("ffn.down_proj", "down"), ("ffn.gate_proj", "gate")),
                 (("ffn.up_proj", "up"), ("ffn.down_proj", "down")), "transformer.norm_f",
                 "lm_head"),
    # post-norm: attn_norm follows the attention's output, ffn_norm the MLP's
    "bert": Names("embeddings.word_embeddings", "embeddings.position_embeddings",
                  "embeddings.token_type_embeddings", "embeddings.LayerNorm",
                  "encoder.layer.{i}", "attention.output.LayerNorm", "attention.self.query",
                  "attention.self.key", "attention.self.value", "", "attention.self",
                  "attention.output.dense", "output.LayerNorm", (),
                  (("intermediate.dense", "up"), ("output.dense", "down")), "", ""),
}


def _positive(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{owner}: {name} must be an integer >= 1, got {value!r}")


def _choice(owner: str, name: str, value, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InputError(f"{owner}: {name} must be one of {', '.join(allowed)}, got {value!r}")


@dataclass(frozen=True)
class Architecture:
    """A decoder (pre-norm) or encoder (post-norm, BERT) transformer, every size explicit,
    named as configs name them (their meaning: docs/MODELS.md). ``kv_heads`` None: ``heads``;
    ``head_dim`` None: ``hidden // heads``; ``fused_qkv``: one q|k|v matrix (GPT-2, MPT);
    ``post_norm``: BERT's norms after each residual add and the embeddings; ``head``: "lm",
    "none", "pooler", "mlm" or "pretraining".
    """

    name: str
    family: str
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    kv_heads: int | None = None
    head_dim: int | None = None
    mlp: str = "swiglu"
    norm: str = "rmsnorm"
    attn_bias: bool = False
    mlp_bias: bool = False
    norm_bias: bool = True
    fused_qkv: bool = False
    positions: str = "rope"
    token_types: int = 0
    post_norm: bool = False
    tied: bool = False
    head: str = "lm"

    def __post_init__(self) -> None:
        owner = f"model {self.name!r}"
        for field in ("hidden", "layers", "heads", "ffn", "vocab", "max_positions"):
            _positive(owner, field, getattr(self, field))
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        _positive(owner, "kv_heads", self.kv_heads)
        if self.heads % self.kv_heads:
            raise InputError(f"{owner}: heads {self.heads} is not a multiple of kv_heads "
                             f"{self.kv_heads}")
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise InputError(f"{owner}: hidden {self.hidden} is not divisible by heads "
                                 f"{self.heads}; give head_dim")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        _positive(owner, "head_dim", self.head_dim)
        if self.token_types < 0 or isinstance(self.token_types, bool):
            raise InputError(f"{owner}: token_types must be an integer >= 0, "
                             f"got {self.token_types!r}")
        _choice(owner, "family", self.family, tuple(NAMES))
        _choice(owner, "mlp", self.mlp, MLPS)
        _choice(owner, "norm", self.norm, NORMS)
        _choice(owner, "positions", self.positions, POSITIONS)
        _choice(owner, "head", self.head, HEADS)
        names = NAMES[self.family]
        if not (names.gated if self.mlp == "swiglu" else names.plain):
            raise InputError(f"{owner}: a {self.family} model has no {self.mlp} MLP")
        if (self.post_norm or self.head in HEADS[2:]) != (self.family == "bert"):
            raise InputError(f"{owner}: post-norm blocks and BERT's heads go together "
                             "(family bert)")

    @property
    def position_limit(self) -> int | None:
        """The longest sequence a learned position table holds (None: no table)."""
        return self.max_positions if self.positions == "learned" else None

    def modules(self) -> list[Op]:
        """Every module in forward order with its parameters."""
        n = NAMES[self.family]
        prefix = "bert." if self.family == "bert" and self.head != "pooler" else ""
        out = [self._embed(prefix + n.embed, self.vocab)]
        if self.positions == "learned":
            out.append(self._embed(prefix + n.positions, self.max_positions))
        if self.token_types:
            out.append(self._embed(prefix + n.types, self.token_types))
        if self.post_norm:
            out.append(self._norm(prefix + n.embed_norm))
        for i in range(self.layers):
            out += self._block(prefix + n.block.format(i=i) + ".")
        if not self.post_norm:
            out.append(self._norm(n.final_norm))
        return out + self._head(prefix)

    @property
    def n_params(self) -> int:
        return sum(numel for op in self.modules() for _, numel in op.params)

    def _embed(self, name: str, rows: int) -> Op:
        return Op(name, "embed", (rows, self.hidden), ((f"{name}.weight", rows * self.hidden),))

    def _norm(self, name: str, in_block: bool = False) -> Op:
        params = ((f"{name}.weight", self.hidden),)
        if self.norm == "layernorm" and self.norm_bias:
            params += ((f"{name}.bias", self.hidden),)
        return Op(name, "norm", (self.hidden,), params, in_block)

    @staticmethod
    def _linear(name: str, d_in: int, d_out: int, bias: bool, in_block: bool = True,
                weight: bool = True, kind: str = "linear") -> Op:
        params = ((f"{name}.weight", d_in * d_out),) if weight else ()
        if bias:
            params += ((f"{name}.bias", d_out),)
        return Op(name, kind, (d_in, d_out), params, in_block)

    def _block(self, b: str) -> list[Op]:
        """One block: pre-norm (norm, attention, norm, MLP) or BERT's post-norm."""
        n, d = NAMES[self.family], self.hidden
        q_dim, kv_dim = self.heads * self.head_dim, self.kv_heads * self.head_dim
        if self.fused_qkv:
            proj = [self._linear(b + n.qkv, d, q_dim + 2 * kv_dim, self.attn_bias)]
        else:
            proj = [self._linear(b + name, d, out, self.attn_bias)
                    for name, out in ((n.q, q_dim), (n.k, kv_dim), (n.v, kv_dim))]
        attention = proj + [Op(b + n.attn, "attn", (q_dim,), (), True),
                            self._linear(b + n.o, q_dim, d, self.attn_bias)]
        shape = {"up": (d, self.ffn), "gate": (d, self.ffn), "down": (self.ffn, d)}
        mlp = [self._linear(b + name, *shape[role], self.mlp_bias)
               for name, role in (n.gated if self.mlp == "swiglu" else n.plain)]
        attn_norm, ffn_norm = self._norm(b + n.attn_norm, True), self._norm(b + n.ffn_norm, True)
        if self.post_norm:
            return attention + [attn_norm] + mlp + [ffn_norm]
        return [attn_norm] + attention + [ffn_norm] + mlp

    def _head(self, prefix: str) -> list[Op]:
        """The head after the last block: an LM head (tied: compute only), or BERT's."""
        d = self.hidden
        if self.head == "none":
            return []
        if self.head == "lm":
            return [self._linear(NAMES[self.family].head, d, self.vocab, False, False,
                                 weight=not self.tied)]
        out = []
        if self.head in ("pooler", "pretraining"):
            out.append(self._linear(prefix + "pooler.dense", d, d, True, False, kind="pooler"))
        if self.head in ("mlm", "pretraining"):
            out += [self._linear("cls.predictions.transform.dense", d, d, True, False),
                    self._norm("cls.predictions.transform.LayerNorm"),
                    # the decoder reuses the word embedding; its bias is the head's own
                    self._linear("cls.predictions.decoder", d, self.vocab, True, False,
                                 weight=not self.tied)]
        if self.head == "pretraining":
            out.append(self._linear("cls.seq_relationship", d, 2, True, False, kind="pooler"))
        return out

"""A model as users describe it: a Hugging Face ``config.json``, or a short spec of a few numbers.

    python -m simddp sweep --model path/to/config.json
    python -m simddp sweep --model bert-large-uncased.json#BertModel     # another head
    python -m simddp sweep --model decoder:hidden=4096,layers=32,heads=32,kv_heads=8,ffn=14336,vocab=128256,seq=8192
    python -m simddp sweep --model mpt:d_model=4096,n_heads=32,n_layers=32,expansion_ratio=4,max_seq_len=2048,vocab_size=50368

A config is read as its ``model_type`` defines it (gpt2, llama, mistral, mpt, bert): the
sizes, grouped-query heads, SwiGLU or GELU MLP, norms, biases and tied embeddings as the
config says, into an :class:`~simddp.presets.architecture.Architecture`; its
``architectures[0]`` picks the head (``FILE.json#ARCH`` another). A spec is
``decoder:``, ``encoder:`` or ``mpt:`` and comma-separated ``KEY=VALUE`` (docs/MODELS.md
lists the keys and defaults)::

    >>> from_spec("decoder:hidden=768,layers=12,heads=12,ffn=3072,vocab=50257,seq=1024,"
    ...           "mlp=gelu,norm=layernorm,bias=true,pos=learned,tied=true").n_params   # GPT-2
    124439808

A config that cannot be read says why in one line (a missing or non-positive size, an
unknown ``model_type`` or architecture): :class:`~simddp.errors.InputError`.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from simddp.errors import InputError
from simddp.inputs.io import read_json
from simddp.presets.architecture import MLPS, NORMS, POSITIONS, Architecture
from simddp.presets.models import MODEL_HELP, ModelSpec, parse_model

SPEC_KINDS = ("decoder", "encoder", "mpt")
# architectures[0] -> the head it puts on the model; the first is the default
ARCHITECTURES = {
    "gpt2": {"GPT2LMHeadModel": "lm", "GPT2Model": "none"},
    "llama": {"LlamaForCausalLM": "lm", "LlamaModel": "none"},
    "mistral": {"MistralForCausalLM": "lm", "MistralModel": "none"},
    "mpt": {"MPTForCausalLM": "lm", "MptForCausalLM": "lm", "MPTModel": "none",
            "MptModel": "none"},
    "bert": {"BertModel": "pooler", "BertForMaskedLM": "mlm",
             "BertForPreTraining": "pretraining"},
}
# keys a config has that a simddp profile does not: such a file is read as a config
CONFIG_KEYS = ("model_type", "architectures", "hidden_size", "n_embd", "d_model")
_MISSING = object()


class _Fields:
    """A config's fields, read with one-line errors that name the file and the field."""

    def __init__(self, doc: dict, where: str, kind: str) -> None:
        self.doc, self.where, self.kind = doc, where, kind

    def raw(self, key: str, default=_MISSING):
        value = self.doc.get(key, default)
        if value is _MISSING:
            raise InputError(f"{self.where}: {key!r} is missing ({self.kind})")
        return value

    def size(self, key: str, default=_MISSING) -> int | None:
        """A positive integer (``default`` where absent or null)."""
        value = self.raw(key, default)
        if value is None and default is not _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{self.where}: {key} must be an integer >= 1, got {value!r}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise InputError(f"{self.where}: {key} must be true or false, got {value!r}")
        return value

    def section(self, key: str) -> "_Fields":
        """A nested object (MPT's attn_config, ffn_config); empty where absent."""
        value = self.doc.get(key) or {}
        if not isinstance(value, dict):
            raise InputError(f"{self.where}: {key} must be an object, got {value!r}")
        return _Fields(value, f"{self.where} {key}", self.kind)


def _gpt2(f: _Fields, name: str, head: str) -> Architecture:
    if f.flag("add_cross_attention", False):
        raise InputError(f"{f.where}: add_cross_attention (an encoder-decoder GPT-2) is not "
                         "supported")
    hidden = f.size("n_embd")
    return Architecture(name, "gpt2", hidden, f.size("n_layer"), f.size("n_head"),
                        f.size("n_inner", 4 * hidden), f.size("vocab_size"),
                        f.size("n_positions"), mlp="gelu", norm="layernorm", attn_bias=True,
                        mlp_bias=True, fused_qkv=True, positions="learned",
                        tied=f.flag("tie_word_embeddings", True), head=head)


def _llama(f: _Fields, name: str, head: str) -> Architecture:
    """Llama and Mistral: SwiGLU, RMSNorm, rotary positions, grouped-query attention."""
    return Architecture(name, "llama", f.size("hidden_size"), f.size("num_hidden_layers"),
                        f.size("num_attention_heads"), f.size("intermediate_size"),
                        f.size("vocab_size"), f.size("max_position_embeddings"),
                        kv_heads=f.size("num_key_value_heads", None),
                        head_dim=f.size("head_dim", None),
                        attn_bias=f.flag("attention_bias", False),
                        mlp_bias=f.flag("mlp_bias", False),
                        tied=f.flag("tie_word_embeddings", False), head=head)


def _mpt(f: _Fields, name: str, head: str) -> Architecture:
    """MosaicML's MPT as llm-foundry builds it: fused Wqkv, LayerNorm, GELU (or GLU) MLP,
    learned positions unless ALiBi or RoPE, and no bias at all with ``no_bias``."""
    attn, ffn = f.section("attn_config"), f.section("ffn_config")
    d_model, heads = f.size("d_model"), f.size("n_heads")
    kv_heads = {"multihead_attention": heads, "multiquery_attention": 1}.get(
        attn.raw("attn_type", "multihead_attention"))
    if kv_heads is None:
        if attn.raw("attn_type") != "grouped_query_attention":
            raise InputError(f"{attn.where}: attn_type must be multihead_attention, "
                             f"multiquery_attention or grouped_query_attention, got "
                             f"{attn.raw('attn_type')!r}")
        kv_heads = attn.size("kv_n_heads")
    ffn_type = ffn.raw("ffn_type", "mptmlp")
    if ffn_type not in ("mptmlp", "mptglu"):
        raise InputError(f"{ffn.where}: ffn_type must be mptmlp or mptglu, got {ffn_type!r}")
    inner = ffn.size("ffn_hidden_size", None) or _expanded(f, ffn, d_model)
    norm_type = str(f.raw("norm_type", "low_precision_layernorm"))
    if norm_type not in ("layernorm", "low_precision_layernorm", "rmsnorm",
                         "low_precision_rmsnorm"):
        raise InputError(f"{f.where}: norm_type must be a layernorm or rmsnorm kind, got "
                         f"{norm_type!r}")
    alibi, rope = attn.flag("alibi", False), attn.flag("rope", False)
    learned = f.flag("learned_pos_emb", True) and not (alibi or rope)   # as MPTConfig sets it
    biased = not f.flag("no_bias", False)
    return Architecture(name, "mpt", d_model, f.size("n_layers"), heads, inner,
                        f.size("vocab_size"), f.size("max_seq_len"), kv_heads=kv_heads,
                        mlp="swiglu" if ffn_type == "mptglu" else "gelu",
                        norm="rmsnorm" if "rmsnorm" in norm_type else "layernorm",
                        attn_bias=biased, mlp_bias=biased, norm_bias=biased, fused_qkv=True,
                        positions="learned" if learned else "alibi" if alibi else "rope",
                        tied=f.flag("tie_word_embeddings", True), head=head)


def _expanded(f: _Fields, ffn: _Fields, d_model: int) -> int:
    """MPT's MLP size: ``expansion_ratio × d_model`` (the ratio at the top or in ffn_config)."""
    ratio = ffn.raw("expansion_ratio", None)
    if ratio is None:
        ratio = f.raw("expansion_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio <= 0:
        raise InputError(f"{f.where}: expansion_ratio must be a number > 0, got {ratio!r}")
    inner = int(d_model * ratio)
    if inner < 1:
        raise InputError(f"{f.where}: expansion_ratio {ratio} × d_model {d_model} is under 1")
    return inner


def _bert(f: _Fields, name: str, head: str) -> Architecture:
    if f.raw("position_embedding_type", "absolute") != "absolute":
        raise InputError(f"{f.where}: position_embedding_type "
                         f"{f.raw('position_embedding_type')!r} is not supported (absolute)")
    if f.flag("is_decoder", False) or f.flag("add_cross_attention", False):
        raise InputError(f"{f.where}: a BERT decoder (is_decoder, add_cross_attention) is not "
                         "supported")
    types = f.raw("type_vocab_size", 2)
    if isinstance(types, bool) or not isinstance(types, int) or types < 0:
        raise InputError(f"{f.where}: type_vocab_size must be an integer >= 0, got {types!r}")
    return Architecture(name, "bert", f.size("hidden_size"), f.size("num_hidden_layers"),
                        f.size("num_attention_heads"), f.size("intermediate_size"),
                        f.size("vocab_size"), f.size("max_position_embeddings"), mlp="gelu",
                        norm="layernorm", attn_bias=True, mlp_bias=True, positions="learned",
                        token_types=types, post_norm=True,
                        tied=f.flag("tie_word_embeddings", True), head=head)


READERS: dict[str, Callable[[_Fields, str, str], Architecture]] = {
    "gpt2": _gpt2, "llama": _llama, "mistral": _llama, "mpt": _mpt, "bert": _bert}


def from_config(doc, where: str, name: str = "", architecture: str | None = None
                ) -> Architecture:
    """The model a Hugging Face config (a parsed ``config.json``) describes; ``architecture``
    overrides its ``architectures[0]``."""
    if not isinstance(doc, dict):
        raise InputError(f"{where}: not a Hugging Face config (a JSON object with model_type)")
    kind = doc.get("model_type", _MISSING)
    if kind is _MISSING:
        raise InputError(f"{where}: no 'model_type'; simddp reads {', '.join(READERS)} "
                         "configs")
    if kind not in READERS:
        raise InputError(f"{where}: model_type {kind!r} is not supported; simddp reads "
                         f"{', '.join(READERS)} configs, or describe the model: --model "
                         "decoder:hidden=...,layers=...,heads=...,ffn=...,vocab=...,seq=...")
    heads = ARCHITECTURES[kind]
    if architecture is None:
        listed = doc.get("architectures") or [next(iter(heads))]
        if not isinstance(listed, list) or not listed or not isinstance(listed[0], str):
            raise InputError(f"{where}: architectures must be a list of class names, got "
                             f"{listed!r}")
        architecture = listed[0]
    if architecture not in heads:
        raise InputError(f"{where}: architecture {architecture!r} is not supported for "
                         f"model_type {kind}; choose {', '.join(heads)} (FILE.json#ARCH)")
    return READERS[kind](_Fields(doc, where, f"a {kind} config"), name or kind,
                         heads[architecture])


def looks_like_config(doc) -> bool:
    """Whether a JSON document is a model config rather than a simddp file (with a format)."""
    return isinstance(doc, dict) and "format" not in doc and any(k in doc for k in CONFIG_KEYS)


def _file_and_arch(text: str) -> tuple[str, str | None]:
    """'cfg.json#BertModel' -> ('cfg.json', 'BertModel'); a name without '#' as it is."""
    path, sep, arch = text.rpartition("#")
    if sep and path.endswith(".json") and arch:
        return path, arch
    return text, None


def load_config(text: str) -> Architecture | None:
    """The model of the config file ``text`` names (``FILE.json`` or ``FILE.json#ARCH``);
    None where the file is JSON of another kind (a simddp profile)."""
    path, arch = _file_and_arch(text)
    doc = read_json(path)
    if not looks_like_config(doc):
        if arch is not None:
            raise InputError(f"{path}: not a Hugging Face config (no model_type), so "
                             f"#{arch} names nothing")
        return None
    stem = Path(path).stem
    name = Path(path).resolve().parent.name if stem == "config" else stem
    return from_config(doc, path, name + (f"#{arch}" if arch else ""), arch)


def _value(text: str):
    """A spec value: an integer, a number, true/false, or a word."""
    lowered = text.lower()
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _pairs(text: str, where: str) -> dict:
    out = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(f"{where}: {item.strip()!r} is not KEY=VALUE "
                             "(e.g. decoder:hidden=4096,layers=32,...)")
        if key.strip() in out:
            raise InputError(f"{where}: {key.strip()} is given twice")
        out[key.strip()] = _value(value.strip())
    return out


# decoder:/encoder: keys -> what they set; the required ones first
SPEC_REQUIRED = ("hidden", "layers", "heads", "ffn", "vocab", "seq")
SPEC_OPTIONAL = {"decoder": ("kv_heads", "head_dim", "mlp", "norm", "bias", "pos", "tied"),
                 "encoder": ("kv_heads", "head_dim", "norm", "bias", "pos", "tied", "types",
                             "head")}
SPEC_DEFAULTS = {"decoder": {"mlp": "swiglu", "norm": "rmsnorm", "bias": False, "pos": "rope",
                             "tied": False},
                 "encoder": {"mlp": "gelu", "norm": "layernorm", "bias": True, "pos": "learned",
                             "tied": True, "types": 2, "head": "pooler"}}
ENCODER_HEADS = ("pooler", "mlm", "pretraining", "none")
# mpt: keys are llm-foundry's own (its yamls' model section); these go in attn_config/ffn_config
MPT_ATTN = ("alibi", "rope", "attn_type", "kv_n_heads")
MPT_FFN = ("ffn_type", "ffn_hidden_size")
MPT_KEYS = ("d_model", "n_heads", "n_layers", "expansion_ratio", "max_seq_len", "vocab_size",
            "no_bias", "learned_pos_emb", "norm_type", "tie_word_embeddings") + MPT_ATTN + MPT_FFN


def is_spec(text: str) -> bool:
    """Whether ``text`` is a short spec (``decoder:``, ``encoder:`` or ``mpt:``)."""
    return text.partition(":")[0] in SPEC_KINDS and ":" in text


def from_spec(text: str) -> Architecture:
    """The model a short spec describes (see the module text and docs/MODELS.md)."""
    kind, _, body = text.partition(":")
    where = f"--model {text}"
    if kind not in SPEC_KINDS:
        raise InputError(f"{where}: a spec starts with {', '.join(k + ':' for k in SPEC_KINDS)}")
    given = _pairs(body, where)
    if kind == "mpt":
        unknown = [k for k in given if k not in MPT_KEYS]
        if unknown:
            raise InputError(f"{where}: unknown key {unknown[0]!r}; mpt keys: "
                             f"{', '.join(MPT_KEYS)}")
        doc = {"model_type": "mpt", **{k: v for k, v in given.items()
                                       if k not in MPT_ATTN + MPT_FFN},
               "attn_config": {k: v for k, v in given.items() if k in MPT_ATTN},
               "ffn_config": {k: v for k, v in given.items() if k in MPT_FFN}}
        return READERS["mpt"](_Fields(doc, where, "an mpt spec"), text, "lm")
    allowed = SPEC_REQUIRED + SPEC_OPTIONAL[kind]
    unknown = [k for k in given if k not in allowed]
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}; {kind} keys: "
                         f"{', '.join(allowed)}")
    missing = [k for k in SPEC_REQUIRED if k not in given]
    if missing:
        raise InputError(f"{where}: no {missing[0]}; a {kind} spec needs "
                         f"{', '.join(SPEC_REQUIRED)}")
    f = _Fields({**SPEC_DEFAULTS[kind], **given}, where, f"a {kind} spec")
    for key, allowed_values in (("mlp", MLPS), ("norm", NORMS), ("pos", POSITIONS),
                                ("head", ENCODER_HEADS)):
        if key in f.doc and f.doc[key] not in allowed_values:
            raise InputError(f"{where}: {key} must be one of {', '.join(allowed_values)}, "
                             f"got {f.doc[key]!r}")
    bias = f.flag("bias", False)
    sizes = dict(hidden=f.size("hidden"), layers=f.size("layers"), heads=f.size("heads"),
                 ffn=f.size("ffn"), vocab=f.size("vocab"), max_positions=f.size("seq"),
                 kv_heads=f.size("kv_heads", None), head_dim=f.size("head_dim", None))
    common = dict(norm=f.doc["norm"], attn_bias=bias, mlp_bias=bias, norm_bias=bias,
                  positions=f.doc["pos"], tied=f.flag("tied", False))
    if kind == "decoder":
        return Architecture(text, "decoder", **sizes, mlp=f.doc["mlp"], **common)
    types = f.doc["types"]
    if isinstance(types, bool) or not isinstance(types, int) or types < 0:
        raise InputError(f"{where}: types must be an integer >= 0, got {types!r}")
    return Architecture(text, "bert", **sizes, mlp="gelu", **common, token_types=types,
                        post_norm=True, head=f.doc["head"])


def is_file(text: str) -> bool:
    """Whether ``--model text`` names a file (a config or a profile), not a preset."""
    path = _file_and_arch(text)[0]
    return path.endswith(".json") or os.sep in path or os.path.exists(path)


def describe_model(text: str) -> ModelSpec | Architecture | None:
    """What ``--model text`` names: a short spec or a config file (an Architecture), a
    preset (a ModelSpec), or None for a profile file; InputError naming what is accepted."""
    if is_spec(text):
        return from_spec(text)
    if is_file(text):
        return load_config(text)
    return parse_model(text, MODEL_HELP)

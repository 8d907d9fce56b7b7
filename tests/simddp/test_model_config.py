"""A model from its Hugging Face config or a short spec: exact parameter counts, tensors in
backward order, the presets' roofline per layer, and one line with exit 2 for a bad config."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simddp.cli.main import main
from simddp.errors import InputError
from simddp.presets.devices import get_device
from simddp.presets.hf_config import from_config, from_spec, load_config
from simddp.presets.models import TRANSFORMERS, build_profile, parse_model

DATA = Path(__file__).resolve().parents[1] / "data"
CONFIGS = DATA / "hf-configs"
# tests/data/hf-configs/SOURCES.md: each count as its source publishes it
PUBLISHED = {"gpt2": 124_439_808, "gpt2-large": 774_030_080,
             "bert-large-uncased.json#BertModel": 335_141_888,
             "meta-llama-3-8b": 8_030_261_248, "mistral-7b-v0.1": 7_241_732_096}
FIVE = ("gpt2", "gpt2-large", "bert-large-uncased", "meta-llama-3-8b", "mistral-7b-v0.1")


def config_path(name: str) -> str:
    return str(CONFIGS / (name if ".json" in name else f"{name}.json"))


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", PUBLISHED)
def test_five_public_configs_give_their_published_parameter_counts_exactly(name):
    assert load_config(config_path(name)).n_params == PUBLISHED[name]


def test_bert_for_masked_lm_is_the_backbone_without_pooler_plus_its_tied_mlm_head():
    # the config names BertForMaskedLM: no pooler (d² + d), an MLM transform (d² + d), its
    # LayerNorm (2d) and the decoder's own bias (vocab); the decoder weight is the embedding
    d, vocab = 1024, 30522
    masked = load_config(config_path("bert-large-uncased"))
    assert masked.n_params == PUBLISHED["bert-large-uncased.json#BertModel"] + 2 * d + vocab


@pytest.mark.parametrize("size", TRANSFORMERS)
def test_a_decoder_spec_rebuilds_each_transformer_preset_tensor_for_tensor(size):
    d, ff, layers, heads = TRANSFORMERS[size]
    spec = from_spec(f"decoder:hidden={d},layers={layers},heads={heads},ffn={ff},vocab=10000,"
                     "seq=1024")
    preset = parse_model(f"transformer-{size}")
    assert spec.n_params == preset.n_params
    a, b = build_profile(spec), build_profile(preset)
    assert [(l.name, l.grad_bytes, l.grad_names, l.forward_s, l.backward_s) for l in a.layers] \
        == [(l.name, l.grad_bytes, l.grad_names, l.forward_s, l.backward_s) for l in b.layers]


def test_the_xl_preset_is_the_published_cs336_xl_size():
    run = json.loads((DATA / "published-runs" / "damek-cs336-2gpu-xl.json").read_text())
    assert round(parse_model("transformer-xl").n_params, -6) == run["model"]["parameters"]


def test_a_gpt2_spec_counts_what_the_gpt2_config_does():
    spec = from_spec("decoder:hidden=768,layers=12,heads=12,ffn=3072,vocab=50257,seq=1024,"
                     "mlp=gelu,norm=layernorm,bias=true,pos=learned,tied=true")
    assert spec.n_params == PUBLISHED["gpt2"]   # q, k, v apart where GPT-2 fuses them


def llm_foundry_rows():
    dims = json.loads((CONFIGS / "llm-foundry-mpt.json").read_text())["models"]
    doc = json.loads((DATA / "published-scale" / "llm-foundry-throughput.json").read_text())
    for table in doc["tables"]:
        for cells in table["rows"]:
            row = dict(zip(table["columns"], cells))
            yield dims[row["Model"]], int(row["SeqLen (T)"]), int(row["NumParams"])


def test_every_llm_foundry_benchmark_row_has_its_published_numparams_from_its_yaml_dims():
    rows = list(llm_foundry_rows())
    assert len(rows) > 100
    for m, seq, published in rows:
        spec = (f"mpt:d_model={m['d_model']},n_heads={m['n_heads']},n_layers={m['n_layers']},"
                f"expansion_ratio={m['expansion_ratio']},max_seq_len={seq},"
                f"vocab_size={m['vocab_size']}")
        assert from_spec(spec).n_params == published, spec


def test_mpt_config_alibi_drops_the_position_table_and_no_bias_every_bias():
    # MPT-7B's values (SOURCES.md); the count is derived here, not published
    doc = {"model_type": "mpt", "architectures": ["MPTForCausalLM"], "d_model": 4096,
           "n_heads": 32, "n_layers": 32, "expansion_ratio": 4, "max_seq_len": 2048,
           "vocab_size": 50432, "no_bias": True, "learned_pos_emb": True,
           "attn_config": {"alibi": True}}
    mpt = from_config(doc, "mpt-7b")
    assert mpt.n_params == 50432 * 4096 + 32 * (12 * 4096**2 + 2 * 4096) + 4096
    assert not any(name.endswith(".bias") for op in mpt.modules() for name, _ in op.params)
    with_table = from_config({**doc, "attn_config": {}, "no_bias": False}, "mpt")
    names = [name for op in with_table.modules() for name, _ in op.params]
    assert "transformer.wpe.weight" in names and "transformer.blocks.0.norm_1.bias" in names


def test_grouped_query_attention_and_untied_head_as_llama_3_says():
    llama = load_config(config_path("meta-llama-3-8b"))
    sizes = {name: n for op in llama.modules() for name, n in op.params}
    assert sizes["model.layers.0.self_attn.k_proj.weight"] == 4096 * 8 * 128
    assert sizes["model.layers.0.self_attn.q_proj.weight"] == 4096 * 4096
    assert sizes["lm_head.weight"] == sizes["model.embed_tokens.weight"] == 128256 * 4096
    assert not any(name.endswith(".bias") for name in sizes)


def test_tensors_come_in_backward_order_with_the_tied_embedding_last():
    gpt2 = build_profile(load_config(config_path("gpt2")), seq=1024)
    order = [gpt2.tensor_names[t] for t in gpt2.ready_order_ids()]
    assert order[:2] == ["transformer.ln_f.bias", "transformer.ln_f.weight"]
    assert order[-2:] == ["transformer.wpe.weight", "transformer.wte.weight"]
    head = next(layer for layer in gpt2.layers if layer.name == "lm_head")
    assert head.grad_bytes == () and head.forward_s > 0        # tied: compute, no tensor
    llama = build_profile(load_config(config_path("meta-llama-3-8b")), seq=128)
    assert llama.tensor_names[llama.ready_order_ids()[0]] == "lm_head.weight"
    # every tensor once, fp32 bytes
    assert llama.grad_total_bytes == 4 * PUBLISHED["meta-llama-3-8b"]


def test_a_layer_time_is_the_presets_roofline_and_fp32_uses_the_fp32_peak():
    llama = load_config(config_path("meta-llama-3-8b"))
    tokens = 2 * 512
    flops = 2 * tokens * 4096 * 14336                       # mlp.up_proj, compute-bound
    bf16 = build_profile(llama, "a100", batch=2, seq=512)
    fp32 = build_profile(llama, "a100", batch=2, seq=512, dtype="fp32")
    up = "model.layers.3.mlp.up_proj"
    assert _layer(bf16, up).forward_s == pytest.approx(flops / (312e12 * 0.4))
    assert _layer(fp32, up).forward_s == pytest.approx(flops / (19.5e12 * 0.4))
    assert _layer(bf16, up).backward_s == pytest.approx(2 * _layer(bf16, up).forward_s)
    assert get_device("a100").for_dtype("fp32").act_bytes == 4


def _layer(profile, name):
    return next(layer for layer in profile.layers if layer.name == name)


def test_checkpointing_recomputes_each_blocks_forward_in_its_backward_only():
    arch = load_config(config_path("gpt2"))
    plain, ckpt = build_profile(arch, seq=256), build_profile(arch, seq=256, checkpointing=True)
    for a, b in zip(plain.layers, ckpt.layers):
        in_block = a.name.startswith("transformer.h.")
        assert b.backward_s == pytest.approx(a.backward_s + (a.forward_s if in_block else 0.0))
        assert b.forward_s == a.forward_s


def test_sequence_defaults_to_the_configs_max_positions(capsys):
    code, out, _ = cli(capsys, "sweep", "--model", config_path("gpt2-large"), "--strategies",
                       "ddp", "--bucket-mb", "25", "--format", "json")
    assert code == 0 and json.loads(out)["setup"]["model"].endswith("b8s1024")
    code, _, err = cli(capsys, "sweep", "--model", config_path("gpt2"), "--seq", "2048")
    assert code == 2 and "--seq" in err and err.count("\n") == 1


def test_step_ms_scales_the_roofline_to_a_measured_one_gpu_step(capsys):
    args = ["simulate", "--model", config_path("gpt2"), "--format", "json", "--world-size", "2",
            "--strategy", "ddp"]
    code, out, _ = cli(capsys, *args)
    base = json.loads(out)["compute_ms"]
    code, out, _ = cli(capsys, *args, "--step-ms", "300")
    assert code == 0 and json.loads(out)["compute_ms"] == pytest.approx(300.0)
    assert base != pytest.approx(300.0)
    code, _, err = cli(capsys, *args, "--step-ms", "300", "--backward-ms", "100")
    assert code == 2 and "--step-ms" in err and err.count("\n") == 1


def write(tmp_path, name: str, doc) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def llama_doc(**changes):
    doc = json.loads((CONFIGS / "meta-llama-3-8b.json").read_text())
    for key, value in changes.items():
        if value is None:
            del doc[key]
        else:
            doc[key] = value
    return doc


BAD = {   # (config document or text, a token the one line must name)
    "missing field": (llama_doc(num_hidden_layers=None), "num_hidden_layers"),
    "missing model_type": (llama_doc(model_type=None), "model_type"),
    "unknown model_type": (llama_doc(model_type="t5"), "t5"),
    "unknown architecture": (llama_doc(architectures=["LlamaForSequenceClassification"]),
                             "LlamaForSequenceClassification"),
    "zero size": (llama_doc(hidden_size=0), "hidden_size"),
    "negative size": (llama_doc(intermediate_size=-1), "intermediate_size"),
    "fractional size": (llama_doc(vocab_size=128256.5), "vocab_size"),
    "string size": (llama_doc(num_attention_heads="32"), "num_attention_heads"),
    "heads not a multiple": (llama_doc(num_key_value_heads=5), "kv_heads"),
    "not json": ("{\"model_type\": \"llama\",", "JSON"),
}


@pytest.mark.parametrize("case", BAD)
@pytest.mark.parametrize("command", ["sweep", "simulate", "account", "models"])
def test_a_bad_config_is_one_line_and_exit_2(capsys, tmp_path, case, command):
    doc, token = BAD[case]
    path = write(tmp_path, "config.json", doc)
    code, out, err = cli(capsys, command, "--model", path)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert token in err


SPECS = {
    "missing key": ("decoder:hidden=64,layers=2,heads=4,ffn=256,vocab=100", "seq"),
    "unknown key": ("decoder:hiden=64,layers=2,heads=4,ffn=256,vocab=100,seq=8", "hiden"),
    "non-positive": ("decoder:hidden=64,layers=0,heads=4,ffn=256,vocab=100,seq=8", "layers"),
    "not key=value": ("decoder:hidden", "hidden"),
    "bad choice": ("decoder:hidden=64,layers=2,heads=4,ffn=256,vocab=100,seq=8,mlp=relu",
                   "relu"),
    "mpt unknown key": ("mpt:d_model=64,n_heads=4,n_layer=2", "n_layer"),
    "mpt missing": ("mpt:d_model=64,n_heads=4,n_layers=2,max_seq_len=8,vocab_size=100",
                    "expansion_ratio"),
}


@pytest.mark.parametrize("case", SPECS)
def test_a_bad_spec_is_one_line_and_exit_2(capsys, case):
    spec, token = SPECS[case]
    code, out, err = cli(capsys, "sweep", "--model", spec)
    assert code == 2 and out == "" and err.count("\n") == 1 and token in err


def test_spec_defaults_and_keys_are_what_docs_models_md_lists():
    text = (Path(__file__).resolve().parents[2] / "docs" / "MODELS.md").read_text()
    from simddp.presets.hf_config import MPT_KEYS, SPEC_OPTIONAL, SPEC_REQUIRED
    keys = set(SPEC_REQUIRED) | {k for ks in SPEC_OPTIONAL.values() for k in ks} | set(MPT_KEYS)
    assert all(f"`{k}`" in text for k in keys), sorted(k for k in keys if f"`{k}`" not in text)


@pytest.mark.parametrize("name", FIVE)
def test_sweep_runs_on_each_config_and_its_json_is_sane(capsys, name):
    code, out, err = cli(capsys, "sweep", "--model", config_path(name), "--link", "ib-hdr",
                         "--world-size", "8", "--bucket-mb", "25,100", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    profile = build_profile(load_config(config_path(name)),
                            seq=load_config(config_path(name)).max_positions)
    assert doc["setup"]["grad_bytes"] == profile.grad_total_bytes
    assert doc["setup"]["tensors"] == profile.n_tensors and doc["setup"]["world_size"] == 8
    assert doc["recommended_bucket_mb"] in (25.0, 100.0)
    steps = [row["step_ms"] for row in doc["rows"]]
    assert steps and all(s > 0 for s in steps)
    compute_ms = doc["setup"]["forward_ms"] + doc["setup"]["backward_ms"]
    assert all(s >= compute_ms for s in steps)      # a step is never shorter than its compute


def test_a_config_file_stays_apart_from_a_profile_file(capsys, tmp_path):
    # an architecture suffix on something that is no config names nothing
    with pytest.raises(InputError, match="#BertModel"):
        load_config(write(tmp_path, "p.json", {"format": "simddp.profile/1", "layers": []})
                    + "#BertModel")


def test_docs_models_md_lists_each_transformer_presets_parameter_count():
    text = (Path(__file__).resolve().parents[2] / "docs" / "MODELS.md").read_text()
    for size in TRANSFORMERS:
        n = parse_model(f"transformer-{size}").n_params
        assert f"| `transformer-{size}` |" in text and f"| {n:,} |" in text, size

"""A Hugging Face GPT-2 at the gpu tier's BIG size (tests/gpu/_cuda.py: 4 blocks of width
1024, 8 x 512 tokens), built from a config: GPU-bound in fp32, unlike examples/gpt2_tiny.py
(2 x 32 tokens, a host-bound 6-8 ms step on an H200)::

    python -m realrun profile --module tests/gpu/_gpt2.py:build --backend nccl --world-size 1
"""
from __future__ import annotations

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from tests.gpu._cuda import BATCH, BIG_DIMS, SEQ


def build():
    config = GPT2Config(n_layer=BIG_DIMS["layers"], n_embd=BIG_DIMS["d_model"],
                        n_head=BIG_DIMS["heads"], vocab_size=BIG_DIMS["vocab"],
                        n_positions=SEQ, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    model.loss_type = "ForCausalLM"
    tokens = torch.randint(0, config.vocab_size, (BATCH, SEQ),
                           generator=torch.Generator().manual_seed(0))
    return model, {"input_ids": tokens, "labels": tokens}

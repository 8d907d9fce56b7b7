"""A small Hugging Face GPT-2 for realrun: 4 blocks, width 128, 52 gradient tensors (4.2 MiB).

    python -m realrun profile --module examples/gpt2_tiny.py:build --out out/gpt2.json
    python -m simddp sweep --model out/gpt2.json --bucket-mb 0.25,1,4
    python -m realrun bench --module examples/gpt2_tiny.py:build --bucket-mb 0.25,1,4
    python -m realrun validate --module examples/gpt2_tiny.py:build --bucket-mb 0.25,1,4

Built from a ``GPT2Config``, so nothing is downloaded. Its token embedding and LM head share
one weight (``tie_word_embeddings``): realrun.DDP all-reduces it once, under its first name
``transformer.wte.weight``, and its gradient is ready only after the whole backward. The
model returns a Hugging Face output whose ``.loss`` realrun uses. Each rank draws its own
token ids from its ``RANK``. Needs ``pip install 'simddp[hf]'`` (transformers).
"""
from __future__ import annotations

import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel

BATCH, SEQ = 2, 32   # one rank's micro-batch: 2 sequences of 32 tokens


def build():
    config = GPT2Config(n_layer=4, n_embd=128, n_head=4, vocab_size=2048, n_positions=SEQ,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    model.loss_type = "ForCausalLM"   # say it: transformers warns when it has to guess
    rank = int(os.environ.get("RANK", "0"))
    tokens = torch.randint(0, config.vocab_size, (BATCH, SEQ),
                           generator=torch.Generator().manual_seed(rank))
    return model, {"input_ids": tokens, "labels": tokens}

"""A small image classifier for realrun: convolutions with BatchNorm, and a frozen stem.

    python -m realrun profile --module examples/cnn.py:build --out out/cnn.json
    python -m realrun validate --module examples/cnn.py:build --bucket-mb 0.05,0.25,1

Three conv blocks (Conv2d, BatchNorm2d, ReLU) and a linear head on 32x32 RGB images. The
stem conv is frozen (``requires_grad_(False)``, as when fine-tuning a pretrained backbone):
it gets no gradient, so realrun.DDP never all-reduces it. BatchNorm's running statistics are
buffers, not parameters: they are broadcast from rank 0 once, never all-reduced (torch's
DistributedDataParallel also re-broadcasts them every forward: ``broadcast_buffers=True``).

The loss function receives the model's output only; anything else it needs (the labels) it
moves to the output's device itself, since realrun moves only ``model`` and ``inputs``.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

BATCH, CLASSES = 8, 10


def block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                         nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(2))


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.features = nn.Sequential(block(16, 32), block(32, 64), block(64, 128))
        self.head = nn.Linear(128 * 4 * 4, CLASSES)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.features(F.relu(self.stem(images)))
        return self.head(x.flatten(1))


def build():
    model = SmallCNN()
    model.stem.requires_grad_(False)          # a frozen layer: no gradient, no all-reduce
    g = torch.Generator().manual_seed(int(os.environ.get("RANK", "0")))
    images = torch.randn(BATCH, 3, 32, 32, generator=g)
    labels = torch.randint(0, CLASSES, (BATCH,), generator=g)
    return model, images, lambda logits: F.cross_entropy(logits, labels.to(logits.device))

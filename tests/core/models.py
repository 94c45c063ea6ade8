"""Small models shared by the core tests."""
from __future__ import annotations

import torch
from torch import nn


def mlp(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def bn_mlp(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.out = nn.Linear(6, 10, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, ids):
        return self.out(self.emb(ids))


def train_step(m, x):
    loss = m(x).pow(2).mean()
    loss.backward()
    return loss


def bare_step(m, x):
    m(x).sum().backward()

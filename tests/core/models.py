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


def assert_sgd_matches_eager(f, m_ref, x, *, steps: int, tol: float):
    """Run `steps` SGD steps through the artifact `f` and through eager `train_step` on two
    copies of `m_ref`; losses and final state (params and buffers) must agree to `tol`."""
    import copy

    m_art = copy.deepcopy(m_ref)
    opt_ref = torch.optim.SGD(m_ref.parameters(), lr=0.1)
    opt_art = torch.optim.SGD(m_art.parameters(), lr=0.1)
    for _ in range(steps):
        opt_ref.zero_grad()
        opt_art.zero_grad()
        l_ref = train_step(m_ref, x)
        l_art = f(m_art, x)
        torch.testing.assert_close(l_art, l_ref.detach(), atol=tol, rtol=tol)
        opt_ref.step()
        opt_art.step()
    for (k, a), b in zip(m_art.state_dict().items(), m_ref.state_dict().values()):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol, msg=k)
    return m_art


# A ResNet-style CNN, here (a module that imports only torch) so that a fresh process
# unpickling it imports nothing else: the warm-path tests count what a load imports.
class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


class SmallResNet(nn.Module):
    def __init__(self, c: int = 8):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c)
        self.blocks, self.head = nn.Sequential(Block(c), Block(c)), nn.Linear(c, 10)

    def forward(self, x):
        x = self.blocks(torch.relu(self.bn(self.stem(x))))
        return self.head(x.mean((2, 3)))


class GPTBlock(nn.Module):
    """A pre-LN decoder block: causal SDPA, GELU MLP."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(
            2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


class GPT(nn.Module):
    """A GPT-style decoder whose head is tied to the embedding (the tests' optimizer steps and
    benchmarks/warm_load.py's GPT step)."""

    def __init__(self, vocab: int = 512, d: int = 128, heads: int = 4, layers: int = 2,
                 seq: int = 64):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.zeros(seq, d))
        self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.emb(idx) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.emb.weight.t()


# The start of a child process's script for the CUDA tests of Triton kernels: a small MLP on
# the GPU (m), a function of it (fn), an example (x) and another input (x2).
CUDA_MLP_SCRIPT = r"""
import json, torch
from precompile_nb import precompile

torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128),
                        torch.nn.Linear(128, 16)).cuda()
def fn(m, x):
    return m(x).softmax(-1).sum(0)
x, x2 = torch.randn(32, 64, device="cuda"), torch.randn(32, 64, device="cuda")
"""

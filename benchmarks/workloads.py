"""The benchmark workloads: deterministic model + inputs + the whole computation `fn`.

Imports only torch, so the same file serves the measuring processes of every python (this
repository's venv, and torch 2.14.1's for its reference `torch.compiler.precompile`). Every
process rebuilds the workload from a seed, so no model or tensor crosses a process boundary.

Sizes depend on the device: the GPU sizes are the ones of the issue (a 4-layer d=512
transformer encoder on batches of 32x128, ...); the CPU sizes are scaled down so that a full
CPU run, which compiles every workload about six times in fresh processes, stays within
~15 minutes on 2 cores.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class Workload:
    name: str
    description: str  # what it computes, with the sizes used on this device
    inference: bool  # calls run under torch.no_grad() (for every system alike)
    fn: Callable[..., Any]  # the whole computation, models as positional arguments
    args: tuple[Any, ...]  # (model, *inputs) on the device
    # (index into args, dim) marked dynamic before each compiler captures (torch's
    # mark_dynamic): the artifact then serves every size in the range
    dynamic: tuple[tuple[int, int], ...] = ()

    def mark_dynamic(self) -> None:
        for i, d in self.dynamic:
            torch._dynamo.mark_dynamic(self.args[i], d)


def _infer(m, x):
    return m(x)


def _transformer_step(m, x):
    loss = m(x).pow(2).mean()
    loss.backward()
    return loss


def _cnn_step(m, x, y):
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    return loss


def _encoder(d: int, heads: int, layers: int) -> nn.Module:
    # dropout 0: the training step is deterministic and every system runs the same math
    layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0,
                                       batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def _cnn(c: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, 10))


class _Residual(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


def _resnet(c: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
        _Residual(c), _Residual(c), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10))


# name -> device kind -> sizes
SIZES = {
    "tiny_mlp": {"cpu": dict(d_in=16, hidden=32, batch=4),
                 "cuda": dict(d_in=16, hidden=32, batch=4)},
    "transformer_infer": {"cpu": dict(d=64, heads=8, layers=2, batch=4, seq=16),
                          "cuda": dict(d=512, heads=8, layers=4, batch=32, seq=128)},
    "transformer_train": {"cpu": dict(d=64, heads=8, layers=2, batch=4, seq=16),
                          "cuda": dict(d=512, heads=8, layers=4, batch=32, seq=128)},
    "cnn_bn_train": {"cpu": dict(c=8, batch=8, hw=16), "cuda": dict(c=32, batch=64, hw=32)},
    "cnn_dynamic_infer": {"cpu": dict(c=8, batch=8, hw=16),
                          "cuda": dict(c=32, batch=64, hw=32)},
}
NAMES = tuple(SIZES)


def describe(name: str, device: str) -> str:
    """What workload `name` computes on `device`, with its sizes."""
    s = SIZES[name]["cuda" if device.startswith("cuda") else "cpu"]
    if name == "tiny_mlp":
        return f"Linear({s['d_in']},{s['hidden']})-ReLU-Linear, batch {s['batch']}, inference"
    if name.startswith("transformer"):
        return (f"{s['layers']}-layer TransformerEncoder d={s['d']} {s['heads']} heads "
                f"(ff {4 * s['d']}, dropout 0), batch {s['batch']}x{s['seq']}, "
                + ("training step (forward, MSE-like loss, backward)"
                   if name.endswith("train") else "inference"))
    if name == "cnn_dynamic_infer":
        return (f"ResNet-style CNN (stem + 2 residual blocks, BatchNorm, c={s['c']}), batch "
                f"{s['batch']}x3x{s['hw']}x{s['hw']} marked dynamic (mark_dynamic), inference")
    return (f"2 conv + BatchNorm layers (c={s['c']}) + linear head, batch "
            f"{s['batch']}x3x{s['hw']}x{s['hw']}, training step (cross-entropy, backward)")


def build(name: str, device: str) -> Workload:
    """The workload `name` on `device` ("cpu" or "cuda"), identical in every process."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    s = SIZES[name][kind]
    torch.manual_seed(0)
    dynamic: tuple[tuple[int, int], ...] = ()
    if name == "tiny_mlp":
        m = nn.Sequential(nn.Linear(s["d_in"], s["hidden"]), nn.ReLU(),
                          nn.Linear(s["hidden"], s["d_in"]))
        m.eval()
        args = (torch.randn(s["batch"], s["d_in"]),)
        fn, inference = _infer, True
    elif name.startswith("transformer"):
        m = _encoder(s["d"], s["heads"], s["layers"])
        args = (torch.randn(s["batch"], s["seq"], s["d"]),)
        train = name.endswith("train")
        m.train(train)
        fn, inference = (_transformer_step, False) if train else (_infer, True)
    elif name == "cnn_bn_train":
        m = _cnn(s["c"])
        args = (torch.randn(s["batch"], 3, s["hw"], s["hw"]),
                torch.randint(0, 10, (s["batch"],)))
        fn, inference = _cnn_step, False
    elif name == "cnn_dynamic_infer":
        m = _resnet(s["c"])
        m.eval()
        args = (torch.randn(s["batch"], 3, s["hw"], s["hw"]),)
        fn, inference, dynamic = _infer, True, ((1, 0),)  # the batch
    else:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(NAMES)}")
    m = m.to(device)
    args = tuple(a.to(device) for a in args)
    return Workload(name=name, description=describe(name, device), inference=inference, fn=fn,
                    args=(m, *args), dynamic=dynamic)

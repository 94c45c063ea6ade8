"""benchmarks/layout_rules.py: Inductor's layout rule asked of a training step's graph as a
GPU would see it, found on the CPU."""
from __future__ import annotations

import torch
from torch import nn

from benchmarks import layout_rules


def _step(m, x):
    loss = m(x).square().mean()
    loss.backward()
    return loss


def test_a_small_channel_cnn_step_gets_nchw_now_as_torch_compiles_forward_does():
    torch.manual_seed(0)
    for c, expected in ((8, (True, False, False)), (96, (True, True, True))):
        m = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                          nn.Conv2d(c, c, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        x = torch.randn(2, 3, 8, 8)
        row = layout_rules.decisions(m, (_step, (x,)), (lambda m, x: m(x), (x,)))
        assert row["convolutions"] == 2 and row["nodes"] > row["forward_nodes"], row
        assert (row["before"], row["now"], row["tc_forward"]) == expected, (c, row)

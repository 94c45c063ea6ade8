"""DETR's encoder layer (and ~50 other transformers layers, most behind a float16 dtype check
that short-circuits in fp32/bf16) clamps non-finite activations in training:
    if self.training: if not torch.isfinite(hidden_states).all(): hidden_states = clamp(...)
bool() of a tensor reduction: refused at capture (invariant 3), GuardOnDataDependentSymNode
"Eq(u0, 1)". Inference (eval) does not take the branch and passes."""
import torch
from precompile_nb import precompile


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, h):
        h = self.lin(h)
        if self.training:
            if not torch.isfinite(h).all():
                v = torch.finfo(h.dtype).max - 1000
                h = torch.clamp(h, min=-v, max=v)
        return h


def step(m, x):
    loss = m(x).sum()
    loss.backward()
    return loss


precompile(step, Layer().train(), torch.randn(2, 8), backend="eager")

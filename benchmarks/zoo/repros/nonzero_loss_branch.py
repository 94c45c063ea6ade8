"""DeBERTa-v2's own sequence-classification loss (transformers 5.24, problem_type None) keeps
the labels >= 0 with nonzero() and branches on how many there are:
    label_index = (labels >= 0).nonzero(); if label_index.size(0) > 0: ...
nonzero's output size is data-dependent, the `if` needs it: refused (invariant 3) with
GuardOnDataDependentSymNode "u0 > 0". Workaround in the model config:
problem_type="single_label_classification" (plain cross-entropy)."""
import torch
from precompile_nb import precompile


def step(m, x, labels):
    logits = m(x)
    label_index = (labels >= 0).nonzero()
    if label_index.size(0) > 0:
        picked = torch.gather(logits, 0, label_index.expand(label_index.size(0), logits.size(1)))
        loss = torch.nn.functional.cross_entropy(picked, torch.gather(labels, 0,
                                                                      label_index.view(-1)))
    else:
        loss = logits.sum() * 0
    loss.backward()
    return loss


precompile(step, torch.nn.Linear(8, 3), torch.randn(4, 8), torch.tensor([0, 2, 1, 0]),
           backend="eager")

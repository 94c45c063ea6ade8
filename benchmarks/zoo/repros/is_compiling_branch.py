"""Code that branches on torch.compiler.is_compiling() (transformers' MoE experts, its
integrations, many libraries) takes the *eager* branch during precompile's capture, because
capture is a make_fx trace, not dynamo: is_compiling() is False. torch.compile takes the other.
"""
import torch
from precompile_nb import precompile


class M(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_compiling():
            return x + 1   # the "compile-friendly" path
        return x - 1       # the eager path (e.g. a fused kernel that does not trace)


x = torch.zeros(2)
code, cache = precompile(lambda m, x: m(x), M(), x, backend="eager")
print("precompile:", precompile.load(code, cache)(M(), x).tolist())
print("torch.compile:", torch.compile(lambda m, x: m(x), backend="eager")(M(), x).tolist())

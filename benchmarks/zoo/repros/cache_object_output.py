"""A model whose output holds a non-pytree object (like transformers' DynamicCache /
EncoderDecoderCache, returned by every decoder's default forward) is refused at capture:
"unsupported non-tensor value of type Cache"."""
import torch
from precompile_nb import precompile


class Cache:  # a plain class holding tensors, like transformers.DynamicCache
    def __init__(self):
        self.keys = []

    def update(self, k):
        self.keys.append(k)
        return k


class Dec(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        cache = Cache()
        h = cache.update(self.lin(x))
        return {"logits": h.sum(-1), "past_key_values": cache}


with torch.no_grad():
    precompile(lambda m, x: m(x), Dec(), torch.randn(2, 8), backend="eager")

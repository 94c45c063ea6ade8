"""A model that memoises tensors in a plain dict attribute during forward (rotary tables,
position ids, masks...): capture runs forward on FakeTensors, so the dict keeps FakeTensors and
the user's model is left holding them after precompile; the next eager call breaks or is wrong.
"""
import torch
from precompile_nb import precompile


class Rotary(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self._cache = {}  # plain dict: not a buffer, invisible to capture's lifting

    def forward(self, x):
        n = x.shape[0]
        if n not in self._cache:
            self._cache[n] = torch.arange(n, dtype=x.dtype)[:, None].cos()
        return self.lin(x) * self._cache[n]


m, x = Rotary(), torch.randn(4, 8)
with torch.no_grad():
    code, cache = precompile(lambda m, x: m(x), m, x, backend="eager")
print("left in the model:", {k: type(v).__name__ for k, v in m._cache.items()})
with torch.no_grad():
    print(m(x).sum())  # eager use of the same model after precompile

# the other order: the cache already holds a real tensor when precompile runs
m2 = Rotary()
with torch.no_grad():
    m2(x)  # fills m2._cache[4] with a real tensor
    try:
        precompile(lambda m, x: m(x), m2, x, backend="eager")
        print("pre-filled cache: precompiled")
    except Exception as e:  # noqa: BLE001
        print("pre-filled cache:", type(e).__name__, "|", " | ".join(str(e).splitlines()[:6]))

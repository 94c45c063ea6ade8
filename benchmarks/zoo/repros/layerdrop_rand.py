"""LayerDrop as transformers writes it (BART, Whisper, Marian, wav2vec2 encoders...):
`if self.training and self.layerdrop > 0.0: if torch.rand([]) < self.layerdrop: skip` - a
training step is refused as data-dependent (invariant 3): the Python `if` calls bool() on a
tensor. transformers 5.24 guards it with `layerdrop > 0.0`, so layerdrop = 0.0 passes; wav2vec2's
default config has layerdrop = 0.1 and so fails (the zoo sets it to 0). Older code without the
guard fails even at 0.0 (python layerdrop_rand.py unguarded)."""
import sys
import torch
from precompile_nb import precompile


class Enc(torch.nn.Module):
    def __init__(self, layerdrop=0.1, guarded=True):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(2))
        self.layerdrop, self.guarded = layerdrop, guarded

    def forward(self, x):
        for layer in self.layers:
            if self.training and (self.layerdrop > 0.0 or not self.guarded):
                dropout_probability = torch.rand([])
                if dropout_probability < self.layerdrop:  # bool(tensor): data-dependent
                    continue
            x = layer(x)
        return x


def step(m, x):
    loss = m(x).sum()
    loss.backward()
    return loss


m = Enc(0.0, guarded=False) if sys.argv[1:] == ["unguarded"] else Enc(0.1)
precompile(step, m.train(), torch.randn(2, 8), backend="eager")

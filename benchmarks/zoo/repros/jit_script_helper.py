"""A helper compiled with torch.jit.script (as transformers' DeBERTa-v2 / older models do for
relative positions) called during capture: the TorchScript interpreter receives FakeTensors."""
import torch
from precompile_nb import precompile


@torch.jit.script
def make_log_bucket_position(relative_pos: torch.Tensor, bucket_size: int, max_position: int):
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    abs_pos = torch.where((relative_pos < mid) & (relative_pos > -mid),
                          torch.tensor(mid - 1).type_as(relative_pos), torch.abs(relative_pos))
    return torch.where(abs_pos <= mid, relative_pos, abs_pos * sign)


class Rel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        pos = torch.arange(x.shape[1])[None, :] - torch.arange(x.shape[1])[:, None]
        b = make_log_bucket_position(pos, 4, 16)
        return self.lin(x) + b.float().mean()


with torch.no_grad():
    code, cache = precompile(lambda m, x: m(x), Rel(), torch.randn(8, 8), backend="eager")
    m, x = Rel(), torch.randn(8, 8)
    print("ok", (precompile.load(code, cache)(m, x) - m(x)).abs().max())

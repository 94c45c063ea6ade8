"""transformers' MoE experts (Mixtral, Qwen2-MoE, ...) call torch.nn.functional.grouped_mm in
float32 on CPU whenever torch.compiler.is_compiling() is False, which it is during precompile's
capture (a make_fx trace). The CPU kernel accepts float32; the meta/fake kernel the trace runs
does not: "Expected inputs of BF16 type but got mat_a.dtype=torch.float32".
Under torch.compile, is_compiling() is True and transformers takes its custom-op fallback."""
import torch
import torch.nn.functional as F
from precompile_nb import precompile


class Experts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 8, 16))  # 2 experts

    def forward(self, x, offs):
        if torch.compiler.is_compiling():      # what transformers' _can_use_grouped_mm does
            return torch.cat([x[:4] @ self.w[0], x[4:] @ self.w[1]])
        return F.grouped_mm(x, self.w, offs=offs)


m, x, offs = Experts(), torch.randn(8, 8), torch.tensor([4, 8], dtype=torch.int32)
print("eager ok:", m(x, offs).shape)
with torch.no_grad():
    precompile(lambda m, x, offs: m(x, offs), m, x, offs, backend="eager")

"""Write the tutorial notebooks (sources only; `python notebooks/build.py --execute` also runs
them so they are committed with their outputs rendered).

Executed without stored widget state: a saved notebook (GitHub, nbviewer, nbconvert) then
shows the static HTML report each output carries beside the live widget.

Conventions for nbval (run in CI with `--nbval-lax`): a cell whose output is a contract is
written with `# NBVAL_CHECK_OUTPUT` and prints only deterministic text; a cell that
demonstrates an error with `# NBVAL_RAISES_EXCEPTION`, and the next cell proves the error
happened. build() turns these marker lines into nbval's cell tags, so `%%` cell magics stay on
the first line and readers see clean cells.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = """\
import warnings, torch
from torch import nn
torch.manual_seed(0)
warnings.filterwarnings("ignore", message="precompile.load executes")
%load_ext precompile_nb"""

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}

NOTEBOOKS["01_quickstart"] = [
    ("md", """# Quickstart: precompile a model in a notebook

`%%precompile` takes the function a cell defines, captures it with the model and example
tensors already in the notebook (by the function's parameter names), lowers the whole
computation through make_fx → AOTAutograd → Inductor, and binds the precompiled callable under
the function's name. The report below the cell shows the calling convention, the generated
source, the FX graph, the kernels and the invariant checklist."""),
    ("code", SETUP),
    ("code", """device = "cuda" if torch.cuda.is_available() else "cpu"   # Triton kernels on a GPU
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).eval().to(device)
x = torch.randn(8, 16, device=device)"""),
    ("code", """%%precompile --out result
def predict(model, x):
    return model(x).softmax(-1)"""),
    ("md", "`predict` is now the precompiled callable; the plain function is `predict.__wrapped__`."),
    ("code", """# NBVAL_CHECK_OUTPUT
print(torch.allclose(predict(model, x), predict.__wrapped__(model, x), atol=1e-6))
for row in result.report["inputs"]:
    print(row["where"], row["kind"], row["shape"], row["dtype"])"""),
    ("md", """## No weights inside

The artifact holds no weights: every parameter is an input. Load a checkpoint into a model of
the same architecture and call the same artifact."""),
    ("code", """# NBVAL_CHECK_OUTPUT
other = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).eval().to(device)
other.load_state_dict({k: v * 0.5 for k, v in model.state_dict().items()})
print(torch.allclose(predict(other, x), other(x).softmax(-1), atol=1e-6))
print("weights in python_code:", any(f"{v.flatten()[0].item():.6f}" in result.python_code
                                     for v in model.state_dict().values()))"""),
    ("md", "The pair is plain data: a Python source string and bytes."),
    ("code", """# NBVAL_CHECK_OUTPUT
print(result.python_code.splitlines()[0])
print("generated kernels for this device:",
      ("triton" if device == "cuda" else "cpp") in {k["kind"] for k in result.report["kernels"]})"""),
]

NOTEBOOKS["02_training_step"] = [
    ("md", """# A training step, precompiled

`.backward()` inside the computation is captured too: the artifact runs forward and backward
and *accumulates* gradients into the runtime model's `.grad`, exactly like eager, so the usual
`zero_grad()` / `optimizer.step()` loop runs unchanged. It returns the function's own result."""),
    ("code", SETUP),
    ("code", """device = "cuda" if torch.cuda.is_available() else "cpu"   # Triton kernels on a GPU
model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 1)).to(device)
x, y = torch.randn(16, 8, device=device), torch.randn(16, 1, device=device)
import copy
reference = copy.deepcopy(model)"""),
    ("code", """%%precompile --out r
def train_step(model, x, y):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss.detach()"""),
    ("code", """# NBVAL_CHECK_OUTPUT
opt = torch.optim.SGD(model.parameters(), lr=0.05)
opt_ref = torch.optim.SGD(reference.parameters(), lr=0.05)
for step in range(5):
    opt.zero_grad(); opt_ref.zero_grad()
    loss = train_step(model, x, y)
    loss_ref = train_step.__wrapped__(reference, x, y)
    opt.step(); opt_ref.step()
    print(step, torch.allclose(loss, loss_ref, atol=1e-5))
print("weights match eager:", all(torch.allclose(a, b, atol=1e-5) for a, b in
      zip(model.state_dict().values(), reference.state_dict().values())))
print("BatchNorm steps:", int(model[1].num_batches_tracked))"""),
    ("md", "Gradients accumulate when you skip `zero_grad()`, like eager `.backward()`:"),
    ("code", """# NBVAL_CHECK_OUTPUT
opt.zero_grad()
train_step(model, x, y); g1 = model[0].weight.grad.clone()
train_step(model, x, y)
print(torch.allclose(model[0].weight.grad, 2 * g1, atol=1e-5))
print("parameters that get gradients:", len(r.report["grads"]))"""),
]

NOTEBOOKS["03_dynamic_shapes"] = [
    ("md", """# Dynamic shapes

Shapes are specialized to the example, except a dimension marked dynamic: `--dynamic x:0`
(or `torch._dynamo.mark_dynamic(x, 0)` before `precompile`) captures it as a symbolic size,
and one artifact serves every batch size. Where the graph needs to know something about that
size, the example decides it and the artifact checks it on every call: a **guard**."""),
    ("code", SETUP),
    ("code", """model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).eval()
x = torch.randn(4, 8)"""),
    ("code", """%%precompile --dynamic x:0 --out r
def classify(model, x):
    return model(x).argmax(-1)"""),
    ("code", """# NBVAL_CHECK_OUTPUT
for n in (1, 7, 33, 100):
    xi = torch.randn(n, 8)
    print(n, torch.equal(classify(model, xi), model(xi).argmax(-1)))
print([row["dynamic"] for row in r.report["inputs"] if row["where"] == "x"])"""),
    ("md", "Only the marked dimension may vary; anything else is a clear error:"),
    ("code", """# NBVAL_CHECK_OUTPUT
from precompile_nb import PrecompileError
try:
    classify(model, torch.randn(5, 9))
except PrecompileError as e:
    print(e.invariant, e.where, "|", e.expected)"""),
    ("md", """## Guards: what the example decides

This function branches on the batch size. The example (batch 4) takes the second branch, so
the artifact is built for the sizes where `x.size(0) > 4` is false, and says so:"""),
    ("code", """%%precompile --dynamic x:0 --out rb --quiet
def branchy(model, x):
    if x.shape[0] > 4:
        return model(x)
    return model(x) * 2"""),
    ("code", """# NBVAL_CHECK_OUTPUT
print(rb.report["guards"][0]["text"])
x3 = torch.randn(3, 8)
print(torch.allclose(branchy(model, x3), model(x3) * 2))
try:
    branchy(model, torch.randn(7, 8))
except PrecompileError as e:
    print(e.invariant, e.where, "|", e.actual)"""),
    ("md", """## What fails loudly

`torch._dynamo.decorators.mark_unbacked(x, 0)` promises more: one graph for *every* size, with
nothing assumed. A graph that needs to branch on that size then cannot exist, and capture
fails, naming the input, the dimension and the way out:"""),
    ("code", """# NBVAL_CHECK_OUTPUT
from precompile_nb import precompile
xu = x.detach()
torch._dynamo.decorators.mark_unbacked(xu, 0)
try:
    precompile(branchy.__wrapped__, model, xu)  # the plain function behind the magic
except PrecompileError as e:
    print(e.what)
    print("fix:", e.hint.split(":")[0])"""),
    ("md", """## A real CNN

A ResNet-style network (convolutions, BatchNorm, residual adds, pooling, a linear head) with a
dynamic batch. BatchNorm needs to know the batch is not empty: that becomes a guard, listed in
the report's Summary under *Guards on dynamic sizes* with the line that needed it. No
`torch._check` in the model."""),
    ("code", """class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))

cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), Block(8),
                    Block(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)).eval()
images = torch.randn(8, 3, 16, 16)"""),
    ("code", """%%precompile --dynamic images:0 --out rc
def predict(cnn, images):
    return cnn(images)"""),
    ("code", """# NBVAL_CHECK_OUTPUT
for n in (1, 7, 64, 300):
    xi = torch.randn(n, 3, 16, 16)
    print(n, torch.allclose(predict(cnn, xi), cnn(xi), atol=1e-5))
print([g["text"] for g in rc.report["guards"]])"""),
    ("md", """## A transformer training step with a dynamic sequence length

One artifact for every sequence length, `.backward()` included; the gradients land in the
model's `.grad` as in eager:"""),
    ("code", """import copy
enc = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
seq = torch.randn(2, 6, 16)"""),
    ("code", """%%precompile --dynamic seq:1 --out rt --quiet
def step(enc, seq):
    loss = enc(seq).pow(2).mean()
    loss.backward()
    return loss.detach()"""),
    ("code", """# NBVAL_CHECK_OUTPUT
for length in (3, 6, 11):
    s = torch.randn(2, length, 16)
    a, b = copy.deepcopy(enc), copy.deepcopy(enc)
    same_loss = torch.allclose(step(a, s), step.__wrapped__(b, s), atol=1e-5)
    same_grads = all(torch.allclose(p.grad, q.grad, atol=1e-4)
                     for p, q in zip(a.parameters(), b.parameters()))
    print(length, same_loss, same_grads)"""),
]

NOTEBOOKS["04_invariants"] = [
    ("md", """# The seven invariants, each broken on purpose

Every violation is a `PrecompileError` naming the invariant, the offending thing, expected vs
actual and the fix; in a notebook the violation explorer shows it. `precompile_nb.check` finds
all problems of a computation in one go, without compiling."""),
    ("code", SETUP + """
import precompile_nb
from precompile_nb import PrecompileError, precompile
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
x = torch.randn(3, 4)"""),
    ("md", "## 1. Everything live is an input"),
    ("code", "scale = torch.randn(2)   # a global tensor: read by the function, not an input"),
    ("code", """# NBVAL_RAISES_EXCEPTION
%%precompile --backend eager
def scaled(model, x):
    return model(x) * scale"""),
    ("code", """# NBVAL_CHECK_OUTPUT
try:
    precompile(lambda m, x: m(x) * scale, model, x, backend="eager")
except PrecompileError as e:
    print(e.invariant, e.where, "|", e.hint)"""),
    ("md", "## 2. The runtime model matches the traced one"),
    ("code", """# NBVAL_CHECK_OUTPUT
%%precompile --backend eager --quiet
def run(model, x):
    return model(x)"""),
    ("code", """# NBVAL_RAISES_EXCEPTION
wider = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
run(wider, x)"""),
    ("code", """# NBVAL_CHECK_OUTPUT
try:
    run(wider, x)
except PrecompileError as e:
    print(e.invariant, e.where, "|", e.expected, "|", e.actual)"""),
    ("md", "## 3. Control flow and shapes are specialized: `.item()` is a capture-time error"),
    ("code", """# NBVAL_CHECK_OUTPUT
def data_dependent(model, x):
    if model(x).sum().item() > 0:
        return x
    return -x
try:
    precompile(data_dependent, model, x, backend="eager")
except PrecompileError as e:
    print(e.invariant, e.stage, "|", e.what)"""),
    ("md", "## 4. Boundary effects: uncapturable side effects are rejected"),
    ("code", """# NBVAL_CHECK_OUTPUT
def noisy(x):
    torch.ops.aten._print("side effect")
    return x + 1
try:
    precompile(noisy, x, backend="eager")
except PrecompileError as e:
    print(e.invariant, "|", e.what)"""),
    ("md", "## 5. Backward is part of the computation: frozen parameters keep `.grad = None`"),
    ("code", """# NBVAL_CHECK_OUTPUT
model[0].weight.requires_grad_(False)
report = precompile_nb.check(lambda m, x: m(x).sum().backward(), model, x)
for f in report.findings:
    print(f.severity, f.invariant, f.where)
model[0].weight.requires_grad_(True)"""),
    ("md", "## 6. dtype, device and (inductor) layout are specialized"),
    ("code", """# NBVAL_CHECK_OUTPUT
try:
    run(model, x.double())
except PrecompileError as e:
    print(e.invariant, e.where, "|", e.actual)"""),
    ("md", "## 7. The cache belongs to its python_code"),
    ("code", """# NBVAL_CHECK_OUTPUT
code_a, cache_a = precompile(lambda m, x: m(x), model, x, backend="eager")
code_b, cache_b = precompile(lambda m, x: m(x) + 1, model, x, backend="eager")
try:
    precompile.load(code_a, cache_b)
except PrecompileError as e:
    print(e.invariant, "|", e.what)"""),
    ("md", "## All problems at once: `precompile_nb.check`"),
    ("code", """# NBVAL_CHECK_OUTPUT
def messy(model, x, k):
    return (model(x) * scale * k).sum()
print(precompile_nb.check(messy, model, x, 3))"""),
]

NOTEBOOKS["05_cache_and_deployment"] = [
    ("md", """# Cache and deployment

Save the pair, load it in a fresh process whose compiler caches are empty, and compare: with
the cache nothing compiles; without it the kernels compile on load. A cache that does not
belong to its python_code is rejected."""),
    ("code", SETUP + """
import json, os, subprocess, sys, tempfile
from precompile_nb import PrecompileError, precompile"""),
    ("code", """model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 8)).eval()
x = torch.randn(16, 32)
workdir = tempfile.mkdtemp()"""),
    ("code", """%%precompile --quiet --out r
def embed(model, x):
    return nn.functional.normalize(model(x), dim=-1)"""),
    ("code", """# NBVAL_CHECK_OUTPUT
py_path, cache_path = r.save(workdir)
print(os.path.basename(py_path), os.path.basename(cache_path))
torch.save({"state": model.state_dict(), "x": x, "ref": embed(model, x)},
           os.path.join(workdir, "ref.pt"))"""),
    ("code", """child = '''
import json, sys, time, warnings, torch
warnings.simplefilter("ignore")
from torch import nn
t0 = time.perf_counter()
from precompile_nb import precompile
d = torch.load(sys.argv[1] + "/ref.pt")
model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 8)).eval()
model.load_state_dict(d["state"])
cache = open(sys.argv[1] + "/embed.cache", "rb").read() if sys.argv[2] == "1" else None
f = precompile.load(open(sys.argv[1] + "/embed.py").read(), cache)
out = f(model, d["x"])
print(json.dumps({"seconds": time.perf_counter() - t0, "match": bool(torch.allclose(out, d["ref"], atol=1e-6))}))
'''
def fresh_load(with_cache):
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp())
    out = subprocess.run([sys.executable, "-c", child, workdir, "1" if with_cache else "0"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])
warm, cold = fresh_load(True), fresh_load(False)
print(f"fresh process, empty compiler caches: with cache {warm['seconds']:.1f} s, "
      f"without {cold['seconds']:.1f} s")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
print(warm["match"], cold["match"], warm["seconds"] < cold["seconds"])"""),
    ("md", "## A tampered or foreign cache"),
    ("code", """# NBVAL_CHECK_OUTPUT
tampered = r.cache[:-20] + bytes(20)
try:
    precompile.load(r.python_code, tampered)
except PrecompileError as e:
    print(e.invariant, "|", e.what)
other_code, other_cache = precompile(lambda m, x: m(x) * 2, model, x, backend="eager")
try:
    precompile.load(r.python_code, other_cache)
except PrecompileError as e:
    print(e.invariant, "|", e.what)"""),
]

NOTEBOOKS["06_gpu"] = [
    ("md", """# On the GPU

With the model and tensors on CUDA, `%%precompile` runs the same pipeline and Inductor emits
Triton kernels (listed in the report's Kernels tab). On a machine without a GPU this notebook
says so and runs the CPU path (C++ kernels)."""),
    ("code", SETUP),
    ("code", """# NBVAL_IGNORE_OUTPUT
device = "cuda" if torch.cuda.is_available() else "cpu"
print("running on", device if device == "cuda" else "cpu: no CUDA GPU here, showing the CPU path")
model = nn.Sequential(nn.Linear(64, 128), nn.LayerNorm(128), nn.GELU(), nn.Linear(128, 10)).to(device)
x = torch.randn(32, 64, device=device)"""),
    ("code", """%%precompile --out r
def forward(model, x):
    return model(x).log_softmax(-1)"""),
    ("code", """# NBVAL_CHECK_OUTPUT
print(torch.allclose(forward(model, x), forward.__wrapped__(model, x), atol=1e-5))
kinds = {k["kind"] for k in r.report["kernels"]}
expected = "triton" if device == "cuda" else "cpp"   # Triton on the GPU, C++ on the CPU
print("kernels generated for this device:", expected in kinds)"""),
    ("code", """# NBVAL_IGNORE_OUTPUT
for k in r.report["kernels"]:
    print(f'{k["kind"]:7s} {k["name"]}')"""),
]

NOTEBOOKS["07_small_gpt"] = [
    ("md", """# A real model: a small GPT, one full training step precompiled

A GPT-style language model written here (random init, no downloads): token and position
embeddings, pre-norm causal self-attention blocks, a weight-tied LM head. The whole training
step, forward, loss and backward, is one artifact; its graph is explored below."""),
    ("code", SETUP),
    ("code", """class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))
        att = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=96, d=32, heads=4, layers=2, block=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # weight tying: one input, not two

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


device = "cuda" if torch.cuda.is_available() else "cpu"   # Triton kernels on a GPU
gpt = GPT().to(device)
ids = torch.randint(0, 96, (4, 16), device=device)
targets = torch.roll(ids, -1, dims=1)
import copy
gpt_ref = copy.deepcopy(gpt)"""),
    ("code", """%%precompile --out r
def lm_step(gpt, ids, targets):
    logits = gpt(ids)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    return loss.detach()"""),
    ("code", """# NBVAL_CHECK_OUTPUT
opt = torch.optim.AdamW(gpt.parameters(), lr=1e-3)
opt_ref = torch.optim.AdamW(gpt_ref.parameters(), lr=1e-3)
for step in range(3):
    opt.zero_grad(); opt_ref.zero_grad()
    loss, loss_ref = lm_step(gpt, ids, targets), lm_step.__wrapped__(gpt_ref, ids, targets)
    opt.step(); opt_ref.step()
    print(step, torch.allclose(loss, loss_ref, atol=1e-4))
wheres = [row["where"] for row in r.report["inputs"]]
print("tied head weight is the embedding's input, not a second one:",
      "gpt.tok.weight" in wheres and not any(w.startswith("gpt.head") for w in wheres))"""),
    ("md", "## Exploring the graph"),
    ("code", """# NBVAL_IGNORE_OUTPUT
from collections import Counter
nodes = r.report["graph"]["nodes"]
print(len(nodes), "graph nodes")
print(Counter(n["role"] for n in nodes))
print(Counter(n["module"].split(".")[0] for n in nodes if n["module"]).most_common(5))"""),
    ("code", """# NBVAL_IGNORE_OUTPUT
from IPython.display import HTML
from precompile_nb.viewers.graph import graph_to_dot, render_svg
dot = graph_to_dot(nodes, node_budget=120)
svg = render_svg(dot)
HTML(svg) if svg else print(dot[:2000])"""),
]


NOTEBOOKS["08_profile_and_diff"] = [
    ("md", """# Profile a training step, diff two precompiles

`%%precompile --profile` runs the artifact a few times under `torch.profiler` after compiling
it and says where the step's time goes: each kernel's time is attributed to the graph nodes it
computes, the nodes to the model's modules, forward and backward apart. The same modules are
timed eagerly (forward hooks around the plain function) for the before/after. Time outside
every kernel (the artifact's input checks, buffer allocation, gradient accumulation into
`.grad`) is its own *(unattributed)* row, so the rows always sum to the step.

Timings vary from run to run: the cells below print only facts that do not."""),
    ("code", SETUP),
    ("code", """device = "cuda" if torch.cuda.is_available() else "cpu"   # Triton kernels on a GPU


def make_model(width):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, width), nn.GELU(), nn.Linear(width, 10)).to(device)


model = make_model(64)
x = torch.randn(64, 32, device=device)
y = torch.randint(0, 10, (64,), device=device)"""),
    ("code", """# NBVAL_IGNORE_OUTPUT
%%precompile --out narrow --profile 10
def train_step(model, x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach()"""),
    ("md", """The profile is plain data in the report (`narrow.report["profile"]`): per module,
per kernel, and `node_seconds` (graph node → seconds per step) for coloring the graph."""),
    ("code", """# NBVAL_CHECK_OUTPUT
import math
prof = narrow.report["profile"]
print("modules with forward time: ", sorted(m["module"] for m in prof["modules"]
                                            if m["forward_seconds"] > 0))
print("modules with backward time:", sorted(m["module"] for m in prof["modules"]
                                            if m["backward_seconds"] > 0))
print("last row:", prof["modules"][-1]["module"])
# the rows sum to the step, or to more on a busy machine (kernels timed apart, never negative)
rows = sum(m["seconds"] for m in prof["modules"])
print("rows cover the step:", rows >= prof["step_seconds"] or math.isclose(rows, prof["step_seconds"]))
print("every kernel ran in the step:", all(k["calls"] >= 1 for k in prof["kernels"]))
print("graph nodes with time:", len(prof["node_seconds"]) > 0)"""),
    ("md", """Profile again later, on other inputs or with more steps; the result is the same
Profile view. Which modules did compiling make faster than eager?"""),
    ("code", """# NBVAL_IGNORE_OUTPUT
p = narrow.profile(model, x, y, steps=20)
for m in p.data.modules:
    if m.eager_forward_seconds:
        print(f"{m.module:10s} forward {m.forward_seconds * 1e6:8.1f} us   "
              f"eager {m.eager_forward_seconds * 1e6:8.1f} us")
p"""),
    ("md", """## What changed between two precompiles

Make the model twice as wide and precompile the same step again. `%precompile_diff a b`
(or `a.diff(b)`) compares the two results: the calling convention, graph nodes added, removed
or changed (matched by name and op), op and kernel counts, fusions, cache size, stage times,
and the `python_code` text as a unified diff."""),
    ("code", """model = make_model(128)"""),
    ("code", """%%precompile --out wide --quiet
def train_step(model, x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach()"""),
    ("code", """# NBVAL_IGNORE_OUTPUT
%precompile_diff narrow wide"""),
    ("code", """# NBVAL_CHECK_OUTPUT
d = narrow.diff(wide).data
for c in d.inputs:
    print(c.where, c.change, c.fields)
print("nodes added/removed:", len(d.nodes_added), len(d.nodes_removed))
print("nodes whose shape changed:", sum("shape" in n.fields for n in d.nodes_changed))
print("python_code differs:", bool(d.code_diff))
print("a result against itself:", narrow.diff(narrow).same)"""),
]

_TAGS = {"# NBVAL_CHECK_OUTPUT": "nbval-check-output",
         "# NBVAL_RAISES_EXCEPTION": "raises-exception",
         "# NBVAL_IGNORE_OUTPUT": "nbval-ignore-output"}


def _code_cell(src: str):
    lines = src.splitlines()
    tags = []
    while lines and lines[0].strip() in _TAGS:
        tags.append(_TAGS[lines.pop(0).strip()])
    cell = new_code_cell("\n".join(lines))
    if tags:
        cell.metadata["tags"] = tags
    return cell


def build(only: list[str] | None = None) -> list[Path]:
    paths = []
    for name, cells in NOTEBOOKS.items():
        if only and not any(name.startswith(o) for o in only):
            continue
        nb = new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nb.cells = [new_markdown_cell(src) if kind == "md" else _code_cell(src)
                    for kind, src in cells]
        path = HERE / f"{name}.ipynb"
        nbformat.write(nb, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    # python notebooks/build.py [--execute] [NAME-PREFIX ...]
    written = build([a for a in sys.argv[1:] if not a.startswith("--")])
    if "--execute" in sys.argv:
        for p in written:
            print("executing", p.name, flush=True)
            subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook",
                            "--execute", "--inplace", "--allow-errors",
                            "--ExecutePreprocessor.timeout=900",
                            "--ExecutePreprocessor.store_widget_state=False", str(p)],
                           check=True)
    print("\n".join(str(p) for p in written))

#!/usr/bin/python3
"""PyTorch baseline of switchyard-bench --kernels: the layer's ops one by one.

The peer baseline only: `switchyard-bench --kernels FILE` compiles every
function of FILE (e.g. bench/Inputs/kernels-47m.mlir: one moe op followed by
moe.cross_entropy against the last argument), writes each function's
arguments (.npy, float32 or int32) and a manifest.json into a directory, runs

    torch_kernels.py DIR [--threads N] [--device cpu|cuda] [--dtype f32|bf16]
                         [--peak]

and reads one JSON object from its stdout (diagnostics and progress go to
stderr). manifest.json is

    {"reps": 5, "functions": [
      {"name": "expert_proj",
       "args": [{"file": "expert_proj.0.npy", "param": "x"}, ...],
       "attrs": {"scale": 0.7, "heads": 2, "k": 3}}, ...]}

with the arguments in the function's order: "param" names the arguments the
loss is differentiated with respect to (lm.param), null marks constants
(expert indices, targets). Shapes come from the arrays. A function's op is
chosen by the prefix of its name (docs/Semantics.md has the equations):

    linear*        moe.linear, scale · x · Wᵀ (attrs "scale", default 1)
    route*         moe.gate + moe.topk (attrs "heads" and "k"): the gates
    expert_proj*   moe.expert_proj (also _dx / _dw: the same op, fewer params)
    expert_merge*  moe.expert_merge (likewise)
    attention_xl*  moe.attention with relative keys (q, k, v, rel)
    attention*     moe.attention without (q, k, v); S may equal T

and the loss is the mean cross-entropy of the op's result viewed as
[*targets.shape, classes] against the targets (the last argument). Other
names are listed under the top-level "skipped".

For each function and formulation it measures the forward pass (the loss,
under torch.no_grad) and the loss and gradient (of the params only), medians
of "reps" runs after one warm-up, CUDA-synchronised, and records the loss and
every param's gradient L2 norm (summed in float64). Formulations:

    linear, route              eager
    expert_proj, expert_merge  loop, dense (as in torch_switchhead.py), and
                               mm: one torch.mm with the op's useful FLOPs
                               (x[N, D] · W[D, H·k·F], or o[N, H·k·F] ·
                               W[H·k·F, D], W random, o the heads repeated k
                               times), its loss over its own output: marked
                               "equal_flops": true, not comparable
    attention                  eager (explicit masked softmax), and
                               sdpa_flash, sdpa_cudnn, sdpa_efficient,
                               sdpa_math (F.scaled_dot_product_attention
                               under sdpa_kernel(that backend))
    attention_xl               eager, and sdpa (the XL term and the causal
                               −inf as one float additive mask)

--dtype bf16 runs the non-SDPA formulations under torch.autocast(bfloat16);
the SDPA ones cast q, k, v (and rel) to bf16 themselves (the f32 leaves get
f32 gradients). The loss is always computed in f32. A formulation that
raises (an SDPA backend refusing the shape or dtype, e.g. flash or cuDNN on
f32) is listed under its function's "skipped" with the reason.

--peak also measures the matmul peak: torch.mm of 8192³ on CUDA in bf16, f32
(TF32 off) and TF32, or 1024³ in f32 on the CPU; 3 warm-ups, median of 10.

Output:

    {"torch": str, "device": "cpu" or the GPU's name, "dtype": "f32"|"bf16",
     "threads": int,
     "peak": {"bf16_tflops", "f32_tflops", "tf32_tflops", "shape": [M, N, K]}
             or null (a measurement not taken is null),
     "functions": {name: {
         "results": {formulation: {"forward_ms", "fwdbwd_ms", "loss",
                                   "grad_norms": {param: norm},
                                   "equal_flops": bool}},
         "skipped": {formulation: reason}}},
     "skipped": {function: reason}}
"""

import argparse
import contextlib
import dataclasses
import json
import math
import sys
import traceback
from pathlib import Path
from typing import Callable, Dict

import numpy as np
import torch

import torch_moe as moe


@dataclasses.dataclass
class Formulation:
    """One way of computing a function's loss.

    loss() returns the scalar loss; `leaves` maps param names to the leaf
    tensors whose gradients are reported; `autocast` says whether --dtype
    bf16 runs it under torch.autocast (the SDPA formulations cast
    themselves).
    """
    loss: Callable[[], torch.Tensor]
    leaves: Dict[str, torch.Tensor]
    equal_flops: bool = False
    autocast: bool = True


class Function:
    """A manifest entry: its arguments on the device and which are params."""

    def __init__(self, directory, spec, device):
        self.name = spec["name"]
        self.attrs = spec.get("attrs") or {}
        self.args, self.names = [], []
        for arg in spec["args"]:
            array = np.load(directory / arg["file"])
            tensor = torch.from_numpy(array).to(device)
            if array.dtype.kind in "iu":
                tensor = tensor.long()
            elif arg["param"] is not None:
                tensor.requires_grad_(True)
            self.args.append(tensor)
            self.names.append(arg["param"])
        self.params = {n: t for n, t in zip(self.names, self.args)
                       if n is not None}

    def expect(self, count, what):
        if len(self.args) != count:
            raise ValueError(f"expected {count} arguments ({what}), got "
                             f"{len(self.args)}")


def logits(out, targets):
    """The op's result viewed as [*targets.shape, classes]."""
    return out.reshape(*targets.shape, -1)


# ---------------------------------------------------------------------------
# The ops: each returns {formulation: Formulation or a reason string}
# ---------------------------------------------------------------------------

def linear(fn, dtype):
    fn.expect(3, "x, w, targets")
    x, w, t = fn.args
    scale = float(fn.attrs.get("scale", 1.0))
    return {"eager": Formulation(
        lambda: moe.cross_entropy(logits(scale * (x @ w.t()), t), t),
        fn.params)}


def route(fn, dtype):
    fn.expect(3, "x, w_sel, targets")
    x, w, t = fn.args
    heads, k = int(fn.attrs["heads"]), int(fn.attrs["k"])

    def loss():
        gates, _ = moe.route(x, w, heads, k)
        return moe.cross_entropy(logits(gates, t), t)

    return {"eager": Formulation(loss, fn.params)}


def experts(fn, op):
    """expert_proj / expert_merge: loop, dense and the equal-FLOPs mm."""
    fn.expect(5, "input, w, gates, indices, targets")
    x, w, g, i, t = fn.args
    project = moe.expert_proj if op == "proj" else moe.expert_merge
    forms = {}
    for name in ("loop", "dense"):
        forms[name] = Formulation(
            lambda name=name: moe.cross_entropy(
                logits(project(x, w, g, i, name), t), t),
            fn.params)

    # The same useful FLOPs as one plain matmul: N × (H·k·F) × D.
    n, heads, k = g.shape
    width = w.shape[2] if op == "proj" else w.shape[1]
    routes = heads * k * width
    generator = torch.Generator().manual_seed(0)
    if op == "proj":
        a = x                                             # [N, D]
        b = torch.randn(x.shape[1], routes, generator=generator)
    else:                                                 # o repeated k times
        a = x.detach().unsqueeze(2).expand(-1, -1, k, -1).reshape(n, routes)
        a = a.clone().requires_grad_(x.requires_grad)     # [N, H·k·F]
        b = torch.randn(routes, w.shape[2], generator=generator)
    b = (b / math.sqrt(b.shape[0])).to(w.device).requires_grad_(
        w.requires_grad)
    leaves = {}
    if x.requires_grad:
        leaves[fn.names[0]] = a
    if w.requires_grad:
        leaves[fn.names[1]] = b
    if leaves:
        forms["mm"] = Formulation(
            lambda: moe.cross_entropy(logits(torch.mm(a, b), t), t), leaves,
            equal_flops=True)
    else:
        forms["mm"] = "neither the input nor the weight is a param"
    return forms


def expert_proj(fn, dtype):
    return experts(fn, "proj")


def expert_merge(fn, dtype):
    return experts(fn, "merge")


def attention_forms(fn, dtype, rel):
    """eager, and the SDPA formulations: per backend without rel, any with."""
    count, what = (5, "q, k, v, rel, targets") if rel else \
        (4, "q, k, v, targets")
    fn.expect(count, what)
    q, k, v = fn.args[:3]
    r = fn.args[3] if rel else None
    t = fn.args[-1]
    batch, queries, heads, width = q.shape

    def loss(core, cast=None, backend=None):
        def run():
            # [B, T, H, F] -> [B, H, T, F], SDPA's layout, and back.
            qq, kk, vv = (a.transpose(1, 2) for a in (q, k, v))
            rr = r
            if cast is not None:
                qq, kk, vv = qq.to(cast), kk.to(cast), vv.to(cast)
                rr = None if r is None else r.to(cast)
            with moe.sdpa_backend(backend):
                o = core(qq, kk, vv, rr)
            o = o.transpose(1, 2).reshape(batch, queries, heads * width)
            return moe.cross_entropy(logits(o, t), t)
        return run

    forms = {"eager": Formulation(loss(moe.attention_eager), fn.params)}
    cast = torch.bfloat16 if dtype == "bf16" else None
    for backend in (("sdpa",) if rel else tuple(moe.SDPA_BACKENDS)):
        selected = None if backend == "sdpa" else backend
        reason = moe.sdpa_unavailable(selected)
        forms[backend] = reason if reason is not None else Formulation(
            loss(moe.attention_sdpa, cast, selected), fn.params,
            autocast=False)
    return forms


def attention_xl(fn, dtype):
    return attention_forms(fn, dtype, rel=True)


def attention(fn, dtype):
    return attention_forms(fn, dtype, rel=False)


# Longest prefixes first: "attention_xl" before "attention".
OPS = (("linear", linear), ("route", route), ("expert_proj", expert_proj),
       ("expert_merge", expert_merge), ("attention_xl", attention_xl),
       ("attention", attention))


# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------

def measure(form, reps, device, dtype):
    """forward_ms, fwdbwd_ms, loss, grad_norms and equal_flops of one form.

    Every call enters its own autocast region, as a training step does:
    autocast caches the bf16 copies of the leaves until the region ends, and
    a copy made under torch.no_grad would carry no gradient.
    """
    def loss():
        with (moe.precision(device, dtype) if form.autocast
              else contextlib.nullcontext()):
            return form.loss()

    def forward():
        with torch.no_grad():
            return loss()

    def step():
        for leaf in form.leaves.values():
            leaf.grad = None
        loss().backward()

    value = float(forward())
    forward_ms = moe.timed(forward, reps, device)
    fwdbwd_ms = moe.timed(step, reps, device)
    return {"forward_ms": forward_ms, "fwdbwd_ms": fwdbwd_ms, "loss": value,
            "grad_norms": {n: moe.grad_norm(t)
                           for n, t in form.leaves.items()},
            "equal_flops": form.equal_flops}


def run_function(fn, reps, device, dtype):
    """{"results", "skipped"} of every formulation of `fn`."""
    builder = next(b for prefix, b in OPS if fn.name.startswith(prefix))
    results, skipped = {}, {}
    for name, form in builder(fn, dtype).items():
        if isinstance(form, str):
            skipped[name] = form
            continue
        print(f"torch_kernels: {fn.name} {name}", file=sys.stderr)
        result, reason = moe.guarded(
            lambda: measure(form, reps, device, dtype), device)
        if reason is not None:
            skipped[name] = reason
            for leaf in form.leaves.values():
                leaf.grad = None
        else:
            results[name] = result
    compare(fn.name, results, dtype)
    return {"results": results, "skipped": skipped}


def compare(name, results, dtype):
    """Warns on stderr where comparable formulations disagree on the loss."""
    tolerance = 2e-2 if dtype == "bf16" else 1e-4
    losses = [(f, r["loss"]) for f, r in results.items()
              if not r["equal_flops"]]
    for form, loss in losses[1:]:
        base_form, base = losses[0]
        if not abs(loss - base) <= tolerance * max(abs(base), 1e-30):
            print(f"torch_kernels: {name}: {form} loss {loss} differs from "
                  f"{base_form} loss {base}", file=sys.stderr)


def matmul_peak(device):
    """torch.mm TFLOP/s: bf16, f32 (TF32 off) and TF32 on CUDA; f32 on CPU."""
    if device.type == "cuda":
        n = 8192
        kinds = (("bf16_tflops", torch.bfloat16, "highest"),
                 ("f32_tflops", torch.float32, "highest"),
                 ("tf32_tflops", torch.float32, "high"))
    else:
        n = 1024
        kinds = (("f32_tflops", torch.float32, "highest"),)
    peak = {"bf16_tflops": None, "f32_tflops": None, "tf32_tflops": None,
            "shape": [n, n, n]}
    saved = torch.get_float32_matmul_precision()
    try:
        for key, dtype, matmul_precision in kinds:
            torch.set_float32_matmul_precision(matmul_precision)
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            ms = moe.timed(lambda: torch.mm(a, b), 10, device, warmups=3)
            peak[key] = 2.0 * n ** 3 / (ms * 1e-3) / 1e12
            print(f"torch_kernels: peak {key} {peak[key]:.1f}",
                  file=sys.stderr)
            del a, b
    finally:
        torch.set_float32_matmul_precision(saved)
    return peak


def main():
    parser = argparse.ArgumentParser(
        description="PyTorch baseline of switchyard-bench --kernels")
    parser.add_argument("dir", type=Path,
                        help="directory with manifest.json and the .npy "
                             "arguments")
    parser.add_argument("--threads", type=int,
                        help="torch.set_num_threads (default: PyTorch's)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    parser.add_argument("--peak", action="store_true",
                        help="also measure the matmul peak")
    args = parser.parse_args()

    if args.threads is not None:
        moe.set_threads(args.threads)
    device = moe.pick_device(args.device)
    torch.set_float32_matmul_precision("highest")  # f32 means f32, not TF32
    manifest = json.loads((args.dir / "manifest.json").read_text())
    peak = matmul_peak(device) if args.peak else None

    functions, skipped = {}, {}
    for spec in manifest["functions"]:
        name = spec["name"]
        if not any(name.startswith(prefix) for prefix, _ in OPS):
            skipped[name] = ("no PyTorch formulation for this function (names "
                             "start with " +
                             ", ".join(p for p, _ in OPS) + ")")
            continue
        try:
            fn = Function(args.dir, spec, device)
            functions[name] = run_function(fn, manifest["reps"], device,
                                           args.dtype)
        except (KeyError, ValueError) as e:  # a malformed manifest entry
            traceback.print_exc(file=sys.stderr)
            skipped[name] = f"{type(e).__name__}: {e}"

    report = {"torch": torch.__version__, "device": moe.device_name(device),
              "dtype": args.dtype, "threads": torch.get_num_threads(),
              "peak": peak, "functions": functions, "skipped": skipped}
    json.dump(moe.json_safe(report), sys.stdout, allow_nan=False)


if __name__ == "__main__":
    main()

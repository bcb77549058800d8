#!/usr/bin/python3
"""PyTorch baseline of bench/switchyard-bench's attention layer.

The peer baseline only: switchyard-bench writes the layer's parameters and
inputs (.npy) and a config.json into a directory, runs

    torch_switchhead.py DIR [THREADS] [--device cpu|cuda] [--dtype f32|bf16]

on it and reads one JSON object from its stdout (diagnostics go to stderr).
The script implements docs/Semantics.md's equations independently of
Switchyard:

    x    = embed[tokens]                           [B, T, D]
    y    = x + Attention(LN(x); LN(memory))       lm.switchhead or lm.mha
    loss = mean cross-entropy(y[b, t], targets[b, t])   (D channels as classes)

with Transformer-XL relative positions and memory. config.json holds
"layer" (the parameters' prefix, "att"), "kind" ("switchhead", the default,
or "dense" for lm.mha), "params" (the parameter names: <layer>.norm.weight,
.norm.bias, .q, .k, .v, .o, .pos, the SwitchHead ones also .sel_v and
.sel_o, and embed.weight), "batch", "time", "width", "heads", "head_dim",
"experts" and "k" (SwitchHead only), "pos" ("xl" or "none"), "memory"
(whether memory.npy is an input), "reps" and "threads"; tokens.npy,
targets.npy and memory.npy sit beside the parameters. The parameter shapes
are Switchyard's (lib/Dialect/Lm/IR/LmOps.cpp): q, k, pos [H·F, D]; SwitchHead
v [H·E, D, F], o [H·E, F, D], sel_v, sel_o [H·E, D]; dense v [H·F, D],
o [D, H·F].

It times, with torch.set_num_threads(THREADS) (default config["threads"]),
the forward pass (the loss) and the forward + backward pass (every
parameter's gradient) of each formulation:

    SwitchHead:  dense  every expert computed (one batched matmul), the top-k
                        gathered and weighted; eager attention
                 loop   one matmul per expert over the tokens that chose it
                        (index_select / index_add_); eager attention
                 sdpa   dense experts; attention through
                        F.scaled_dot_product_attention
    dense MHA:   eager  explicit masked-softmax attention
                 sdpa   attention through F.scaled_dot_product_attention

"sdpa" passes scale 1 (queries and keys are pre-scaled by F^(-1/4)) and a
float additive mask: the XL relative-position term, −inf on future keys.
Where PyTorch has no SDPA (before 2.0), or it raises, the formulation is
left out of "results" and listed in "skipped" with the reason.

--device cuda puts every tensor on the GPU and ends every timed run with
torch.cuda.synchronize(); --dtype bf16 runs under torch.autocast(bfloat16)
(matmuls in bf16 with f32 accumulation, the loss in f32). Times are medians
of config["reps"] runs after one warm-up run. It prints

    {"threads": int, "torch": str, "device": "cpu" or the GPU's name,
     "dtype": "f32" | "bf16",
     "results": {formulation: {"forward_ms", "fwdbwd_ms", "loss",
                               "grad_norms": {param: L2 norm}}},
     "skipped": {formulation: reason}}
"""

import json
import sys

import numpy as np
import torch
import torch.nn.functional as F

import torch_moe as moe

FORMULATIONS = {"switchhead": ("dense", "loop", "sdpa"),
                "dense": ("eager", "sdpa")}


class Layer:
    """The embedding, one attention layer and the loss, on `device`."""

    def __init__(self, directory, config, device):
        self.c = config
        self.kind = config.get("kind", "switchhead")
        if self.kind not in FORMULATIONS:
            raise SystemExit(f"unknown layer kind {self.kind!r}")
        if config["pos"] not in ("xl", "none"):
            raise NotImplementedError("the bench configurations use xl")
        prefix = config["layer"] + "."

        def load(name):
            array = np.load(directory / f"{name}.npy")
            return torch.from_numpy(array).to(device)

        self.params = {n: load(n).requires_grad_(True)
                       for n in config["params"]}
        self.p = {n[len(prefix):] if n.startswith(prefix) else n: t
                  for n, t in self.params.items()}
        self.tokens = load("tokens").long()
        self.targets = load("targets").long()
        self.memory = load("memory") if config["memory"] else None
        memory = 0 if self.memory is None else self.memory.shape[1]
        keys = config["time"] + memory
        self.pe = moe.sinusoids(keys, config["width"], device)       # [S, D]

    def norm(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.p["norm.weight"],
                            self.p["norm.bias"], eps=1e-5)

    def forward(self, formulation):
        """The loss of `formulation` (see FORMULATIONS)."""
        c, p = self.c, self.p
        batch, time_steps, model = c["batch"], c["time"], c["width"]
        heads, width = c["heads"], c["head_dim"]
        experts = "loop" if formulation == "loop" else "dense"
        core = moe.attention_sdpa if formulation == "sdpa" else \
            moe.attention_eager
        scale = width ** -0.25
        x = F.embedding(self.tokens, p["embed.weight"])           # [B, T, D]
        h = self.norm(x)
        src = h
        if self.memory is not None:
            src = torch.cat([self.norm(self.memory), h], dim=1)     # [B, S, D]
        keys = src.shape[1]
        flat = src.reshape(-1, model)                               # [BS, D]
        q = scale * (h @ p["q"].t())                             # [B, T, HF]
        k = scale * (src @ p["k"].t())                           # [B, S, HF]
        if self.kind == "switchhead":
            gv, iv = moe.route(flat, p["sel_v"], heads, c["k"])
            v = moe.expert_proj(flat, p["v"], gv, iv, experts)   # [BS, H, F]
        else:
            v = flat @ p["v"].t()                                   # [BS, HF]
        q = q.view(batch, time_steps, heads, width).transpose(1, 2)
        k = k.view(batch, keys, heads, width).transpose(1, 2)
        v = v.view(batch, keys, heads, width).transpose(1, 2)    # [B, H, S, F]
        rel = None
        if c["pos"] == "xl":
            rel = (scale * (self.pe @ p["pos"].t())).view(keys, heads, width)
        o = core(q, k, v, rel)                                   # [B, H, T, F]
        o = o.transpose(1, 2).reshape(batch * time_steps, heads, width)
        hflat = h.reshape(-1, model)
        if self.kind == "switchhead":
            go, io = moe.route(hflat, p["sel_o"], heads, c["k"])
            branch = moe.expert_merge(o, p["o"], go, io, experts)   # [BT, D]
        else:
            branch = o.reshape(batch * time_steps, heads * width) @ p["o"].t()
        y = x + branch.view(batch, time_steps, model)
        return moe.cross_entropy(y, self.targets)

    def clear(self):
        for t in self.params.values():
            t.grad = None




def measure(layer, formulation, reps, device, dtype):
    """forward_ms, fwdbwd_ms, loss and gradient norms of one formulation.

    Every call enters its own autocast region, as a training step does:
    autocast caches the bf16 copies of the parameters until the region ends,
    and a copy made under torch.no_grad would carry no gradient.
    """
    def loss():
        with moe.precision(device, dtype):
            return layer.forward(formulation)

    def forward():
        with torch.no_grad():
            return loss()

    def step():
        layer.clear()
        loss().backward()

    value = float(forward())
    forward_ms = moe.timed(forward, reps, device)
    fwdbwd_ms = moe.timed(step, reps, device)
    return {
        "forward_ms": forward_ms,
        "fwdbwd_ms": fwdbwd_ms,
        "loss": value,
        "grad_norms": {n: moe.grad_norm(t) for n, t in layer.params.items()},
    }


def main():
    args, config, threads, device = moe.peer_setup(
        "PyTorch baseline of switchyard-bench's attention layer")
    layer = Layer(args.dir, config, device)
    results, skipped = {}, {}
    for formulation in FORMULATIONS[layer.kind]:
        if formulation != "sdpa":
            results[formulation] = measure(layer, formulation, config["reps"],
                                           device, args.dtype)
            continue
        reason = moe.sdpa_unavailable()
        if reason is None:  # SDPA may still refuse the inputs
            result, reason = moe.guarded(
                lambda: measure(layer, formulation, config["reps"], device,
                                args.dtype), device)
        if reason is None:
            results[formulation] = result
        else:
            skipped[formulation] = reason
            layer.clear()
    report = {"threads": threads, "torch": torch.__version__,
              "device": moe.device_name(device), "dtype": args.dtype,
              "results": results, "skipped": skipped}
    json.dump(moe.json_safe(report), sys.stdout, allow_nan=False)


if __name__ == "__main__":
    main()

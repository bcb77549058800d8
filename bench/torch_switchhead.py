#!/usr/bin/python3
"""PyTorch eager baseline of bench/switchyard-bench's SwitchHead layer.

The peer baseline only: switchyard-bench writes the layer's parameters and
inputs (.npy) and a config.json into a directory, runs this script on it and
reads one JSON object from its stdout. The script implements
docs/Semantics.md's equations independently of Switchyard:

    x  = embed[tokens]                                  [B, T, D]
    y  = x + SwitchHead(LN(x); LN(memory))              (lm.switchhead)
    loss = mean cross-entropy(y[b, t, :], targets[b, t]) (the D channels as classes)

and times, with torch.set_num_threads(threads), the forward pass (y and the
loss) and the forward + backward pass (every parameter's gradient), each in
two formulations of the expert projections:

    dense: every expert of every head computed (x · W_v for all H·E experts,
           one batched matmul), then the top-k gathered and weighted: the
           usual eager formulation for few experts;
    loop:  one matmul per expert over the tokens that chose it
           (index_select / index_add_), as MoE code does for many experts.

It prints {"threads", "torch", "results": {formulation: {"forward_ms",
"fwdbwd_ms", "loss", "grad_norms": {param: norm}}}}, times as medians of
`reps` runs after one warm-up run.
"""

import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F


def load(directory, name):
    return torch.from_numpy(np.load(directory / f"{name}.npy"))


class Layer:
    def __init__(self, directory, config):
        self.c = config
        prefix = config["layer"]
        self.names = config["params"]
        self.params = {n: load(directory, n).requires_grad_(True)
                       for n in self.names}
        self.p = {n[len(prefix) + 1:] if n.startswith(prefix + ".") else n: t
                  for n, t in self.params.items()}
        self.tokens = load(directory, "tokens").long()
        self.targets = load(directory, "targets").long()
        self.memory = load(directory, "memory") if config["memory"] else None

    def norm(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.p["norm.weight"],
                            self.p["norm.bias"], eps=1e-5)

    def route(self, h, sel):
        """Sigmoid scores [N, H, E] and their top-k (values, indices)."""
        c = self.c
        scores = torch.sigmoid(h @ sel.t()).view(h.shape[0], c["heads"],
                                                 c["experts"])
        return torch.topk(scores, c["k"], dim=-1)

    def expert_proj(self, x, w, gates, idx, formulation):
        """v[n, a, :] = Σ_j g[n, a, j] · x[n] · W[a·E + i[n, a, j]]."""
        c = self.c
        heads, experts, width = c["heads"], c["experts"], c["head_dim"]
        n = x.shape[0]
        if formulation == "dense":
            # [N, H·E, F] for every expert, then gather the chosen ones.
            every = torch.einsum("nd,edf->nef", x, w).view(n, heads, experts,
                                                           width)
            chosen = torch.gather(
                every, 2, idx.unsqueeze(-1).expand(-1, -1, -1, width))
            return (gates.unsqueeze(-1) * chosen).sum(2)
        out = x.new_zeros(n, heads, width)
        for a in range(heads):
            for e in range(experts):
                rows, slots = torch.nonzero(idx[:, a, :] == e, as_tuple=True)
                if rows.numel() == 0:
                    continue
                part = (x.index_select(0, rows) @ w[a * experts + e]) * \
                    gates[rows, a, slots].unsqueeze(-1)
                out[:, a, :] = out[:, a, :].index_add(0, rows, part)
        return out

    def expert_merge(self, o, w, gates, idx, formulation):
        """y[n, :] = Σ_a Σ_j g[n, a, j] · o[n, a, :] · W[a·E + i[n, a, j]]."""
        c = self.c
        heads, experts = c["heads"], c["experts"]
        n, model = o.shape[0], w.shape[-1]
        if formulation == "dense":
            every = torch.einsum("naf,aefd->naed", o,
                                 w.view(heads, experts, -1, model))
            chosen = torch.gather(
                every, 2, idx.unsqueeze(-1).expand(-1, -1, -1, model))
            return (gates.unsqueeze(-1) * chosen).sum((1, 2))
        y = o.new_zeros(n, model)
        for a in range(heads):
            for e in range(experts):
                rows, slots = torch.nonzero(idx[:, a, :] == e, as_tuple=True)
                if rows.numel() == 0:
                    continue
                part = (o[rows, a, :] @ w[a * experts + e]) * \
                    gates[rows, a, slots].unsqueeze(-1)
                y = y.index_add(0, rows, part)
        return y

    def forward(self, formulation):
        c, p = self.c, self.p
        batch, time_steps, model = c["batch"], c["time"], c["width"]
        heads, width = c["heads"], c["head_dim"]
        scale = width ** -0.25
        x = F.embedding(self.tokens, p["embed.weight"])           # [B, T, D]
        h = self.norm(x)
        src = h
        mem = 0
        if self.memory is not None:
            mem = self.memory.shape[1]
            src = torch.cat([self.norm(self.memory), h], dim=1)     # [B, S, D]
        keys = src.shape[1]
        q = scale * (h @ p["q"].t())                                # [B, T, HF]
        k = scale * (src @ p["k"].t())                              # [B, S, HF]
        flat = src.reshape(-1, model)
        gv, iv = self.route(flat, p["sel_v"])
        v = self.expert_proj(flat, p["v"], gv, iv, formulation)     # [BS, H, F]
        q = q.view(batch, time_steps, heads, width).transpose(1, 2)
        k = k.view(batch, keys, heads, width).transpose(1, 2)
        v = v.view(batch, keys, heads, width).transpose(1, 2)       # [B, H, S, F]
        tq = torch.arange(time_steps).view(-1, 1)
        pos_u = torch.arange(keys).view(1, -1) - mem
        scores = q @ k.transpose(-1, -2)                            # [B, H, T, S]
        if c["pos"] == "rope":
            raise NotImplementedError("the bench configurations use xl")
        if c["pos"] == "xl":
            half = model // 2
            omega = 10000.0 ** (-2.0 * torch.arange(half, dtype=torch.float64)
                                / model)
            delta = torch.arange(keys, dtype=torch.float64).view(-1, 1)
            pe = torch.cat([torch.sin(delta * omega), torch.cos(delta * omega)],
                           dim=1).float()                           # [S, D]
            kp = scale * (pe @ p["pos"].t())                        # [S, HF]
            kp = kp.view(keys, heads, width).permute(1, 2, 0)        # [H, F, S]
            rel = q @ kp                                            # [B, H, T, δ]
            dist = (tq - pos_u).clamp(0, keys - 1)                  # [T, S]
            scores = scores + torch.gather(
                rel, 3, dist.expand(batch, heads, -1, -1))
        scores = scores.masked_fill(pos_u > tq, float("-inf"))
        o = torch.softmax(scores, dim=-1) @ v                       # [B, H, T, F]
        o = o.transpose(1, 2).reshape(batch * time_steps, heads, width)
        hflat = h.reshape(-1, model)
        go, io = self.route(hflat, p["sel_o"])
        branch = self.expert_merge(o, p["o"], go, io, formulation)
        y = x + branch.view(batch, time_steps, model)
        return F.cross_entropy(y.reshape(-1, model), self.targets.reshape(-1))

    def clear(self):
        for t in self.params.values():
            t.grad = None


def timed(run, reps):
    run()  # warm-up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    directory = Path(sys.argv[1])
    config = json.loads((directory / "config.json").read_text())
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else config["threads"]
    torch.set_num_threads(threads)
    layer = Layer(directory, config)
    results = {}
    for formulation in ("dense", "loop"):
        with torch.no_grad():
            loss = float(layer.forward(formulation))
            forward_ms = timed(lambda: layer.forward(formulation),
                               config["reps"])

        def step():
            layer.clear()
            layer.forward(formulation).backward()

        fwdbwd_ms = timed(step, config["reps"])
        results[formulation] = {
            "forward_ms": forward_ms,
            "fwdbwd_ms": fwdbwd_ms,
            "loss": loss,
            "grad_norms": {n: float(t.grad.norm()) if t.grad is not None
                           else 0.0 for n, t in layer.params.items()},
        }
    json.dump({"threads": threads, "torch": torch.__version__,
               "results": results}, sys.stdout)


if __name__ == "__main__":
    main()

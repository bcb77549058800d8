#!/usr/bin/python3
"""PyTorch peer of switchyard-bench --train-step: the same model, trained the
same way, in PyTorch eager.

The peer baseline only: switchyard-bench writes a model's layers, its
parameters and a check batch into a directory and runs

    torch_train_step.py DIR [THREADS] [--device cpu|cuda] [--dtype f32|bf16]

on it; it reads one JSON object from stdout (diagnostics go to stderr).
The model is built from docs/Semantics.md's equations independently of
Switchyard, layer by layer in program order from config.json's "layers"
(each takes the previous one's result):

    {"op": "embed", "name": "embed", "vocab": V}
    {"op": "switchhead" | "mha", "name": ..., "heads", "head_dim",
     "experts", "k" (SwitchHead), "pos": "xl" | "rope" | "none",
     "memory": its length (0: none), "dropout", "expert_dropout"}
    {"op": "ffn", "name": ..., "d_ff", "dropout"}
    {"op": "sigma_moe", "name": ..., "experts", "k", "expert_dim",
     "dropout", "expert_dropout", "entropy_reg"}
    {"op": "layer_norm", "name": ..., "eps"}
    {"op": "output", "name": ..., "vocab"}

with Switchyard's parameter names and shapes (lib/Dialect/Lm/IR/LmOps.cpp),
loaded from <name>.npy. config.json also holds "batch", "time", "reps",
"threads" and "train": {"lr", "beta1", "beta2", "eps", "weight_decay",
"clip", "warmup", "steps"}.

It first computes the loss of the check batch (tokens.npy, targets.npy) in
inference mode, memories zero, for switchyard-bench to compare with the
compiled forward function. Then it times training steps as `switchyard
train` takes them (docs/Semantics.md, "Training"): random token windows,
the forward pass in training mode (residual and expert dropout, the σ-MoE
entropy term), backward, gradient clipping to "clip", AdamW (decay on
parameters of rank ≥ 2 only) at the warm-up-and-cosine learning rate of the
step; the XL models carry each attention block's input to the next step as
its memory, detached. Each SwitchHead projection formulation of
torch_moe.py is a row: "dense" (every expert, then gather) and "loop" (one
matmul per expert); σ-MoE layers always loop over their experts. With the
official SwitchHead implementation at hand (SWITCHHEAD_OFFICIAL: the
directory that holds its `switchhead` package, ../shared/peers/
switchhead-official; it needs Triton, so a CUDA machine), the row
"official" runs each SwitchHead layer as the official module
(SwitchHeadXL or SwitchHeadRope, its CVMM Triton kernels, SDPA for RoPE)
on the same parameters, the pre-LN residual block around it as the paper's
code builds it (`x + module(LN(x))`); an XL layer's memory is then the
module's own key/value cache of the previous step (the last T keys and
values, detached), where the other rows recompute the memory's keys and
values from the previous step's input. TORCH_STEP_ROWS (a comma-separated
list of dense, loop, official; a model without SwitchHead layers has the
one row "eager", loop's) keeps only those rows. Times are medians of
config["reps"] steps after one warm-up step. It prints

    {"threads": int, "torch": str, "device": "cpu" or the GPU's name,
     "dtype": "f32" | "bf16", "params": int, "check_loss": float,
     "results": {formulation: {"step_ms", "first_loss", "last_loss"}}}
"""

import importlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import torch_moe as moe


class Model:
    """The layers of config["layers"] over the parameters in `directory`."""

    def __init__(self, directory, config, device):
        self.layers = config["layers"]
        self.device = device
        self.params = {}
        for name in config["params"]:
            array = np.load(directory / f"{name}.npy")
            self.params[name] = torch.from_numpy(array).to(device) \
                .requires_grad_(True)
        self.memory_lengths = [layer["memory"] for layer in self.layers
                               if layer.get("memory")]
        self.official = {}

    def use_official(self, package):
        """Runs every SwitchHead layer as the official module on this
        model's parameters (which become the modules' own)."""
        names = {"q": "q.weight", "k": "k.weight", "v": "v", "o": "o",
                 "sel_v": "sel_v", "sel_o": "sel_o", "pos": "pos_to_pk"}
        for layer in self.layers:
            if layer["op"] != "switchhead":
                continue
            pos = layer.get("pos", "none")
            if pos not in ("xl", "rope"):
                raise SystemExit("torch_train_step: the official SwitchHead "
                                 f"has no positions '{pos}'")
            core = package.SwitchHeadXL if pos == "xl" else \
                package.SwitchHeadRope
            model = self.p(layer, "q").shape[1]
            module = core(model, layer["heads"], layer["experts"],
                          d_head=layer["head_dim"], moe_k=layer["k"],
                          expert_dropout=layer.get("expert_dropout", 0.0))
            module = module.to(self.device)
            for ours, theirs in names.items():
                key = f"{layer['name']}.{ours}"
                if key not in self.params:
                    continue
                owner, _, attribute = theirs.rpartition(".")
                target = module.get_submodule(owner)
                parameter = torch.nn.Parameter(self.params[key].detach())
                setattr(target, attribute, parameter)
                self.params[key] = parameter
            self.official[layer["name"]] = module

    def p(self, layer, name):
        return self.params[f"{layer['name']}.{name}"]

    def norm(self, layer, x, prefix="norm."):
        return F.layer_norm(x, (x.shape[-1],), self.p(layer, prefix + "weight"),
                            self.p(layer, prefix + "bias"),
                            eps=layer.get("eps", 1e-5))

    def forward(self, tokens, memories, training, experts):
        """(logits, next memories, regulariser) of tokens [B, T]."""
        x = None
        next_memories = []
        regulariser = 0.0
        for layer in self.layers:
            op = layer["op"]
            if op == "embed":
                x = F.embedding(tokens, self.p(layer, "weight"))
            elif op == "layer_norm":
                x = self.norm(layer, x, prefix="")
            elif op == "output":
                x = x @ self.p(layer, "weight").t()
            elif op == "switchhead" and experts == "official":
                cache = None
                if layer.get("memory"):
                    cache = memories[len(next_memories)]
                branch, cache = self.official_attention(layer, x, cache,
                                                        training)
                if layer.get("memory"):
                    next_memories.append(cache)
                x = x + F.dropout(branch, layer.get("dropout", 0.0), training)
            elif op in ("switchhead", "mha"):
                memory = None
                if layer.get("memory"):
                    memory = memories[len(next_memories)]
                    next_memories.append(x.detach())
                branch = self.attention(layer, x, memory, training, experts)
                x = x + F.dropout(branch, layer.get("dropout", 0.0), training)
            elif op == "ffn":
                h = self.norm(layer, x)
                branch = F.relu(h @ self.p(layer, "up").t()) @ \
                    self.p(layer, "down").t()
                x = x + F.dropout(branch, layer.get("dropout", 0.0), training)
            elif op == "sigma_moe":
                branch, entropy = self.sigma_moe(layer, x, training)
                regulariser = regulariser + entropy
                x = x + F.dropout(branch, layer.get("dropout", 0.0), training)
            else:
                raise SystemExit(f"torch_train_step: no peer for lm.{op}")
        return x, next_memories, regulariser

    def route(self, layer, x, sel, heads, training):
        """moe.gate + moe.topk with expert dropout in training."""
        drop = layer.get("expert_dropout", 0.0) if training else 0.0
        return moe.route(x, sel, heads, layer["k"], drop)

    def attention(self, layer, x, memory, training, experts):
        batch, time_steps, model = x.shape
        heads, width = layer["heads"], layer["head_dim"]
        pos = layer.get("pos", "none")
        scale = width ** -0.25
        h = self.norm(layer, x)
        src = h if memory is None else \
            torch.cat([self.norm(layer, memory), h], dim=1)
        keys = src.shape[1]
        flat = src.reshape(-1, model)
        q = scale * (h @ self.p(layer, "q").t())
        k = scale * (src @ self.p(layer, "k").t())
        if layer["op"] == "switchhead":
            gv, iv = self.route(layer, flat, self.p(layer, "sel_v"), heads,
                                training)
            v = moe.expert_proj(flat, self.p(layer, "v"), gv, iv, experts)
        else:
            v = flat @ self.p(layer, "v").t()
        q = q.view(batch, time_steps, heads, width).transpose(1, 2)
        k = k.view(batch, keys, heads, width).transpose(1, 2)
        v = v.view(batch, keys, heads, width).transpose(1, 2)
        rel = None
        if pos == "xl":
            pe = moe.sinusoids(keys, model, x.device)
            rel = (scale * (pe @ self.p(layer, "pos").t())).view(
                keys, heads, width)
        elif pos == "rope":
            q = rope(q, 0)
            k = rope(k, time_steps - keys)    # memory keys: negative
        o = moe.attention_eager(q, k, v, rel)                   # [B, H, T, F]
        o = o.transpose(1, 2).reshape(batch * time_steps, heads, width)
        if layer["op"] == "switchhead":
            go, io = self.route(layer, h.reshape(-1, model),
                                self.p(layer, "sel_o"), heads, training)
            branch = moe.expert_merge(o, self.p(layer, "o"), go, io, experts)
        else:
            branch = o.reshape(-1, heads * width) @ self.p(layer, "o").t()
        return branch.view(batch, time_steps, model)

    def official_attention(self, layer, x, cache, training):
        """The official module on LN(x): (branch, its next key/value cache,
        the last T keys and values, detached; None without memory)."""
        module = self.official[layer["name"]]
        module.train(training)
        h = self.norm(layer, x)
        branch, cache = module(h, h, h, mask=None, kv_cache=cache)
        if cache is not None:
            keep = layer["memory"]
            cache = {name: value[..., -keep:, :].detach()
                     for name, value in cache.items()}
        return branch, cache

    def sigma_moe(self, layer, x, training):
        """The σ-MoE branch (per-expert loop) and its −λ·H(P) term."""
        batch, time_steps, model = x.shape
        h = self.norm(layer, x).reshape(-1, model)
        sel = self.p(layer, "sel")
        gates, index = self.route(layer, h, sel, 1, training)
        gates, index = gates[:, 0], index[:, 0]                       # [N, k]
        up, down = self.p(layer, "up"), self.p(layer, "down")
        y = h.new_zeros(h.shape)
        for e in range(up.shape[0]):
            rows, slots = torch.nonzero(index == e, as_tuple=True)
            if rows.numel() == 0:
                continue
            part = F.relu(h.index_select(0, rows) @ up[e]) @ down[e]
            y = y.index_add(0, rows, part * gates[rows, slots].unsqueeze(-1))
        entropy = 0.0
        reg = layer.get("entropy_reg", 0.0)
        if training and reg > 0:
            mean = torch.softmax(h @ sel.t(), dim=-1).mean(0)
            entropy = reg * (mean * torch.log(mean)).sum()   # −λ·H(P)
        return y.view(batch, time_steps, model), entropy

    def zero_memories(self, batch, model):
        if self.official:
            # The official module's cache starts empty: no memory at first.
            return [{} for _ in self.memory_lengths]
        return [torch.zeros(batch, length, model, device=self.device)
                for length in self.memory_lengths]




def rope(x, first):
    """Rotate-half RoPE on the first 2·⌊F/4⌋ channels of x [B, H, S, F];
    row s has position first + s."""
    width = x.shape[-1]
    r = 2 * (width // 4)
    if r == 0:
        return x
    half = r // 2
    inv = 10000.0 ** (-2.0 * torch.arange(half, dtype=torch.float64) / r)
    p = torch.arange(x.shape[2], dtype=torch.float64) + first
    theta = (p.view(-1, 1) * inv.view(1, -1)).to(x.device)
    cos, sin = theta.cos().float(), theta.sin().float()
    a, b, rest = x[..., :half], x[..., half:r], x[..., r:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


def schedule(train, step):
    """lr_t = lr · min(1, t/warmup) · ½(1 + cos(π·t/steps))."""
    warm = min(1.0, step / train["warmup"]) if train["warmup"] > 0 else 1.0
    return train["lr"] * warm * 0.5 * (1 + math.cos(math.pi * step /
                                                    train["steps"]))


def train_steps(model, config, experts, device, dtype):
    """Step times (ms) and losses of config["reps"] + 1 training steps."""
    train = config["train"]
    decay = [t for t in model.params.values() if t.dim() >= 2]
    plain = [t for t in model.params.values() if t.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": train["weight_decay"]},
         {"params": plain, "weight_decay": 0.0}],
        lr=train["lr"], betas=(train["beta1"], train["beta2"]),
        eps=train["eps"])
    batch, time_steps = config["batch"], config["time"]
    vocab = model.layers[0]["vocab"]
    generator = torch.Generator().manual_seed(5)
    width = model.params[f"{model.layers[0]['name']}.weight"].shape[1]
    memories = model.zero_memories(batch, width)
    times, losses = [], []
    for step in range(1, config["reps"] + 2):
        window = torch.randint(0, vocab, (batch, time_steps + 1),
                               generator=generator).to(device)
        moe.synchronize(device)
        start = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = schedule(train, step)
        optimizer.zero_grad(set_to_none=True)
        with moe.precision(device, dtype):
            logits, memories, regulariser = model.forward(
                window[:, :-1], memories, True, experts)
        loss = moe.cross_entropy(logits, window[:, 1:])
        (loss + regulariser).backward()
        if train["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.params.values(),
                                           train["clip"])
        optimizer.step()
        losses.append(float(loss))
        moe.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    timed = sorted(times[1:])
    return {"step_ms": timed[len(timed) // 2], "first_loss": losses[0],
            "last_loss": losses[-1]}


def official_package():
    """The official SwitchHead package from SWITCHHEAD_OFFICIAL, or None
    (unset, or it does not import here: it needs Triton and CUDA)."""
    root = os.environ.get("SWITCHHEAD_OFFICIAL")
    if not root:
        return None
    sys.path.insert(0, root)
    try:
        return importlib.import_module("switchhead")
    except Exception as error:    # ImportError, or Triton without a GPU
        print(f"torch_train_step: no official row: importing switchhead "
              f"from {root} failed: {error}", file=sys.stderr)
        return None


def main():
    args, config, threads, device = moe.peer_setup(
        "PyTorch peer of switchyard-bench --train-step")
    model = Model(args.dir, config, device)
    switchhead = any(layer["op"] == "switchhead" for layer in model.layers)
    width = model.params[f"{model.layers[0]['name']}.weight"].shape[1]

    tokens = torch.from_numpy(np.load(args.dir / "tokens.npy")).long()
    targets = torch.from_numpy(np.load(args.dir / "targets.npy")).long()
    with torch.no_grad(), moe.precision(device, args.dtype):
        memories = model.zero_memories(tokens.shape[0], width)
        logits, _, _ = model.forward(tokens.to(device), memories, False,
                                     "loop")
        check_loss = float(moe.cross_entropy(logits, targets.to(device)))

    params = sum(t.numel() for t in model.params.values())
    official = official_package() if switchhead else None
    results = {}
    formulations = ("dense", "loop") if switchhead else ("loop",)
    if official:
        formulations += ("official",)
    wanted = os.environ.get("TORCH_STEP_ROWS")
    if wanted:
        formulations = tuple(f for f in formulations
                             if f in wanted.split(","))
    for experts in formulations:
        name = experts if switchhead else "eager"
        print(f"torch_train_step: {name}", file=sys.stderr)
        # Every formulation trains from the same initial parameters.
        model = Model(args.dir, config, device)
        if experts == "official":
            model.use_official(official)
            if not model.memory_lengths:
                # Without memories the official module computes the same
                # function: its inference loss must be the check loss.
                with torch.no_grad(), moe.precision(device, args.dtype):
                    logits, _, _ = model.forward(tokens.to(device), [], False,
                                                 experts)
                    loss = float(moe.cross_entropy(logits, targets.to(device)))
                print(f"torch_train_step: official inference loss {loss:.6f}"
                      f" (check loss {check_loss:.6f})", file=sys.stderr)
        results[name] = train_steps(model, config, experts, device,
                                    args.dtype)
    report = {"threads": threads, "torch": torch.__version__,
              "device": moe.device_name(device), "dtype": args.dtype,
              "params": params,
              "check_loss": check_loss, "results": results}
    json.dump(moe.json_safe(report), sys.stdout, allow_nan=False)


if __name__ == "__main__":
    main()

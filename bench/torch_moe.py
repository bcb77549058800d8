"""PyTorch formulations of Switchyard's moe ops, shared by the peer baselines.

bench/torch_switchhead.py (a whole attention layer) and bench/torch_kernels.py
(the layer's ops one by one) import this module; it is not a script. Every
function implements one equation of docs/Semantics.md independently of
Switchyard, in plain PyTorch:

    route         moe.gate + moe.topk: sigmoid(x · W_selᵀ) viewed [N, H, E],
                  then its top-k (values carry the gradient, indices none)
    expert_proj   moe.expert_proj, with r = h·E + i[n, h, j]:
                  out[n, h] = Σ_j g[n, h, j] · x[n] · W[r]
    expert_merge  moe.expert_merge: y[n] = Σ_h Σ_j g[n, h, j] · o[n, h] · W[r]
    attention_*   moe.attention (causal, keys ending where the queries end,
                  optionally with Transformer-XL relative keys), on
                  [B, H, T, F] queries and [B, H, S, F] keys and values
    cross_entropy moe.cross_entropy / lm.cross_entropy, in f32

The expert projections come in two formulations: "dense" computes every
expert of every head (one batched matmul) and gathers the chosen k, the usual
eager code for few experts; "loop" runs one matmul per expert over the tokens
that chose it (index_select / index_add), as MoE code does for many experts.
The attention core comes as "eager" (explicit masked softmax) or through
torch.nn.functional.scaled_dot_product_attention (PyTorch 2.0 and later) with
an optional backend (torch.nn.attention.sdpa_kernel, PyTorch 2.2 and later);
`sdpa_unavailable` says why a request cannot run on this PyTorch.

The rest are the measurement helpers both scripts share: median timing with
CUDA synchronisation, bf16 autocast, float64 gradient norms and JSON-safe
numbers.
"""

import argparse
import contextlib
import ctypes
import functools
import json
import math
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")

try:  # PyTorch 2.2+: explicit backend selection.
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    SDPBackend = sdpa_kernel = None

try:  # PyTorch 2.2+: lower-right causal masks, run by flash attention as such.
    from torch.nn.attention.bias import causal_lower_right
except ImportError:
    causal_lower_right = None

# Backend formulation names (torch_kernels.py) -> SDPBackend member names.
SDPA_BACKENDS = {
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
    "sdpa_math": "MATH",
}


# ---------------------------------------------------------------------------
# Routing and expert projections
# ---------------------------------------------------------------------------

def route(x, w_sel, heads, k, dropout=0.0):
    """Sigmoid router scores of x [N, D] and their top-k: (gates, indices).

    scores[n, h, e] = sigmoid(x[n] · W_sel[h·E + e]) in f32 (moe.gate), then
    torch.topk along the experts (moe.topk: descending, the values are the
    gates and carry the gradient). Both results are [N, H, k]. With expert
    dropout, each score is masked with that probability before the top-k
    (key −inf), the gate still the unmasked score.
    """
    scores = torch.sigmoid((x @ w_sel.t()).float())
    scores = scores.view(x.shape[0], heads, w_sel.shape[0] // heads)
    if dropout <= 0:
        return torch.topk(scores, k, dim=-1)
    masked = scores.masked_fill(torch.rand_like(scores) < dropout,
                                float("-inf"))
    _, index = torch.topk(masked.detach(), k, dim=-1)
    return torch.gather(scores, -1, index), index


def expert_proj(x, w, gates, idx, formulation):
    """moe.expert_proj of x [N, D], W [H·E, D, F], gates/indices [N, H, k].

    out[n, h, :] = Σ_j g[n, h, j] · x[n, :] · W[h·E + i[n, h, j]]   [N, H, F]
    """
    n, heads = x.shape[0], gates.shape[1]
    experts, width = w.shape[0] // heads, w.shape[2]
    if formulation == "dense":
        # [N, H·E, F] for every expert, then gather the chosen ones.
        every = torch.einsum("nd,edf->nef", x, w).view(n, heads, experts,
                                                       width)
        chosen = torch.gather(
            every, 2, idx.unsqueeze(-1).expand(-1, -1, -1, width))
        return (gates.unsqueeze(-1) * chosen).sum(2)
    if formulation != "loop":
        raise ValueError(f"unknown expert formulation {formulation!r}")
    out = x.new_zeros(n, heads, width, dtype=torch.promote_types(
        x.dtype, gates.dtype))
    for a in range(heads):
        for e in range(experts):
            rows, slots = torch.nonzero(idx[:, a, :] == e, as_tuple=True)
            if rows.numel() == 0:
                continue
            part = (x.index_select(0, rows) @ w[a * experts + e]) * \
                gates[rows, a, slots].unsqueeze(-1)
            out[:, a, :] = out[:, a, :].index_add(0, rows,
                                                  part.to(out.dtype))
    return out


def expert_merge(o, w, gates, idx, formulation):
    """moe.expert_merge of o [N, H, F], W [H·E, F, D], gates/indices [N, H, k].

    y[n, :] = Σ_h Σ_j g[n, h, j] · o[n, h, :] · W[h·E + i[n, h, j]]   [N, D]
    """
    n, heads = o.shape[0], gates.shape[1]
    experts, model = w.shape[0] // heads, w.shape[2]
    if formulation == "dense":
        every = torch.einsum("naf,aefd->naed", o,
                             w.view(heads, experts, -1, model))
        chosen = torch.gather(
            every, 2, idx.unsqueeze(-1).expand(-1, -1, -1, model))
        return (gates.unsqueeze(-1) * chosen).sum((1, 2))
    if formulation != "loop":
        raise ValueError(f"unknown expert formulation {formulation!r}")
    y = o.new_zeros(n, model, dtype=torch.promote_types(o.dtype, gates.dtype))
    for a in range(heads):
        for e in range(experts):
            rows, slots = torch.nonzero(idx[:, a, :] == e, as_tuple=True)
            if rows.numel() == 0:
                continue
            part = (o[rows, a, :] @ w[a * experts + e]) * \
                gates[rows, a, slots].unsqueeze(-1)
            y = y.index_add(0, rows, part.to(y.dtype))
    return y


# ---------------------------------------------------------------------------
# Attention core (moe.attention)
# ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def positions(queries, keys, device):
    """(allowed [T, S] bool, distance [T, S] long) of the causal XL layout.

    Query t has position t and key u position u − (S − T): the keys end where
    the queries end, the first S − T of them being memory. `allowed` is
    position(u) ≤ t; `distance` is t − position(u), clamped into [0, S) (the
    clamped entries are the disallowed ones).
    """
    t = torch.arange(queries, device=device).view(-1, 1)
    pos = torch.arange(keys, device=device).view(1, -1) - (keys - queries)
    return pos <= t, (t - pos).clamp(0, keys - 1)


def rel_scores(q, rel):
    """The XL term q_t · rel[t − position(u)] per head: [B, H, T, S].

    q is [B, H, T, F]; rel [S, H, F] holds one projected key per distance
    δ in [0, S) (moe.attention's `rel` operand).
    """
    batch, heads, queries, _ = q.shape
    keys = rel.shape[0]
    by_distance = q @ rel.to(q.dtype).permute(1, 2, 0)       # [B, H, T, δ]
    _, distance = positions(queries, keys, q.device)
    return torch.gather(by_distance, 3,
                        distance.expand(batch, heads, -1, -1))


def attention_eager(q, k, v, rel=None):
    """Causal attention with an explicit masked softmax: [B, H, T, F].

    q [B, H, T, F] and k, v [B, H, S, F] are already scaled (no 1/√F).
    """
    scores = q @ k.transpose(-1, -2)                          # [B, H, T, S]
    if rel is not None:
        scores = scores + rel_scores(q, rel)
    allowed, _ = positions(q.shape[2], k.shape[2], q.device)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_sdpa(q, k, v, rel=None):
    """The same through F.scaled_dot_product_attention (scale 1).

    With rel, the mask is a float additive bias: the XL term, and −inf on the
    future keys. Without, S == T is is_causal=True, and S > T (memory keys)
    the lower-right causal bias (torch.nn.attention.bias, which flash and
    memory-efficient attention run without materialising it) or, before
    PyTorch 2.2, an explicit boolean mask. k, v (and the bias) take q's dtype.
    """
    queries, keys = q.shape[2], k.shape[2]
    k, v = k.to(q.dtype), v.to(q.dtype)
    if rel is not None:
        allowed, _ = positions(queries, keys, q.device)
        bias = rel_scores(q, rel).masked_fill(~allowed, float("-inf"))
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias.to(q.dtype), scale=1.0)
    if queries == keys:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                              scale=1.0)
    if causal_lower_right is not None:
        mask = causal_lower_right(queries, keys)
    else:
        mask, _ = positions(queries, keys, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)


def sdpa_unavailable(backend=None):
    """Why SDPA (`backend`: an SDPA_BACKENDS key) can't run; None if it can."""
    if not HAS_SDPA:
        return (f"torch {torch.__version__} has no "
                "torch.nn.functional.scaled_dot_product_attention")
    if backend is None:
        return None
    if sdpa_kernel is None:
        return (f"torch {torch.__version__} has no "
                "torch.nn.attention.sdpa_kernel")
    if not hasattr(SDPBackend, SDPA_BACKENDS[backend]):
        return (f"torch {torch.__version__} has no "
                f"SDPBackend.{SDPA_BACKENDS[backend]}")
    return None


def sdpa_backend(backend):
    """Context manager that restricts SDPA to `backend` (None: any)."""
    if backend is None:
        return contextlib.nullcontext()
    return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[backend]))


# ---------------------------------------------------------------------------
# Loss, precision and measurement
# ---------------------------------------------------------------------------

def cross_entropy(logits, targets):
    """Mean cross-entropy of logits [..., C] against targets [...], in f32."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                           targets.reshape(-1))


def precision(device, dtype):
    """The autocast context for dtype "bf16" (matmuls in bf16), else none."""
    if dtype == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(run, reps, device, warmups=1):
    """Median milliseconds of `reps` calls of run() after `warmups` calls."""
    for _ in range(warmups):
        run()
    synchronize(device)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def guarded(run, device):
    """(run(), None), or (None, reason) where run() raised.

    For the formulations that may legitimately fail (an SDPA backend refusing
    the shape or dtype, memory running out): the reason is the exception and
    the warnings raised meanwhile (PyTorch explains a refused SDPA backend in
    warnings); the traceback goes to stderr, as do the warnings of a run that
    succeeded.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = run()
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            if device.type == "cuda":
                torch.cuda.empty_cache()
            notes = _unique(str(w.message) for w in caught)
            reason = f"{type(e).__name__}: {e}".strip()
            if notes:
                reason += " [" + "; ".join(notes) + "]"
            return None, reason[:2000]
    for note in _unique(str(w.message) for w in caught):
        print(f"warning: {note}", file=sys.stderr)
    return value, None


def _unique(messages):
    return list(dict.fromkeys(messages))


def grad_norm(tensor):
    """L2 norm of tensor.grad, summed in float64; 0.0 without a gradient."""
    if tensor.grad is None:
        return 0.0
    return math.sqrt(float(tensor.grad.double().pow(2).sum()))


def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def json_safe(value):
    """value with non-finite floats replaced by None (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def pick_device(name):
    """torch.device for "cpu" or "cuda", failing clearly without a GPU."""
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device cuda: torch {torch.__version__} sees no "
                         "CUDA device")
    return torch.device(name)


# ---------------------------------------------------------------------------
# The peer scripts' common set-up
# ---------------------------------------------------------------------------

def set_threads(threads):
    """torch.set_num_threads(threads), and the same for OpenBLAS's own
    threads where PyTorch does its matmuls through it (Debian's PyTorch on
    libopenblas: torch.set_num_threads leaves OpenBLAS on every core, so a
    "one thread" peer would multiply on all of them)."""
    torch.set_num_threads(threads)
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line}
    for path in paths:
        try:
            ctypes.CDLL(path).openblas_set_num_threads(threads)
        except (OSError, AttributeError):
            pass


def peer_setup(description):
    """(args, config, threads, device) of a peer script's command line

        SCRIPT DIR [THREADS] [--device cpu|cuda] [--dtype f32|bf16]

    with DIR/config.json read, torch's threads set (THREADS, default
    config["threads"]) and f32 matmuls in f32 (no TF32)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("dir", type=Path,
                        help="directory with config.json and the .npy inputs")
    parser.add_argument("threads", type=int, nargs="?",
                        help="torch.set_num_threads (default: config's)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    args = parser.parse_args()
    config = json.loads((args.dir / "config.json").read_text())
    threads = args.threads if args.threads is not None else config["threads"]
    set_threads(threads)
    device = pick_device(args.device)
    torch.set_float32_matmul_precision("highest")
    return args, config, threads, device


def sinusoids(keys, model, device):
    """XL encodings [S, D], row δ for the relative position p = −δ (key −
    query) as the official SwitchHeadXL builds them: pe[δ, 2i] = sin(p·ω_i),
    pe[δ, 2i+1] = cos(p·ω_i).

    ω_i = 10000^(−2i/D), i < D/2, computed in float64 and rounded to f32.
    """
    half = model // 2
    omega = 10000.0 ** (-2.0 * torch.arange(half, dtype=torch.float64) / model)
    position = -torch.arange(keys, dtype=torch.float64).view(-1, 1)
    pe = torch.stack([torch.sin(position * omega),
                      torch.cos(position * omega)], dim=2).view(keys, model)
    return pe.float().to(device)

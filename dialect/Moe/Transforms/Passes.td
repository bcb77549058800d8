//===- Passes.td - moe dialect passes ----------------------*- tablegen -*-===//
//
// Passes over moe ops: the fusions that turn groups of moe ops (and the
// moe-level ops of their gradients) into kernel-level ops, each lowered by
// convert-moe-to-linalg to one row kernel. They run after differentiation
// and before the lowering (buildLowerToLinalgPipeline), and each can be
// switched off by a pipeline option (fuse-router, fuse-expert-projection,
// ...): the unfused ops compute the same results.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_TD
#define SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeFuseRouterPass : Pass<"moe-fuse-router"> {
  let summary = "Fuse the router's matmul, sigmoid and top-k into "
                "moe.fused_router";
  let description = [{
    Rewrites every `moe.topk` whose scores come from a `moe.gate` into one
    `moe.fused_router`: per token and head, the `E` router dot products,
    the sigmoid and a running top-k in `k` scalar registers, in one kernel,
    without the `[N, H, E]` score tensor in memory. The top-k's mask
    (expert dropout) moves to the fused op. If the gate's scores have other
    users (in a gradient function, the gate's gradient reads them), the
    fused op also writes the scores and those users read them instead. The
    gate's gradient rule already ran: the pass belongs after
    `lm-differentiate` (the fused op has no gradient rule).

    The fused op computes the scores in the same order as `moe.gate`'s
    lowering, so values and indices match the unfused route bit for bit.

    Before:

    ```mlir
    %s = moe.gate %x, %w : tensor<?x16xf32>, tensor<10x16xf32> -> tensor<?x2x5xf32>
    %v, %i = moe.topk %s k(3) : tensor<?x2x5xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>
    ```

    After:

    ```mlir
    %v, %i, %s = moe.fused_router %x, %w k(3) : tensor<?x16xf32>, tensor<10x16xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MoeFuseExpertProjectionPass : Pass<"moe-fuse-expert-projection"> {
  let summary = "Fuse the gathered expert projections of SwitchHead into "
                "one kernel each";
  let description = [{
    Rewrites `moe.expert_proj` (the V projection, per head) into
    `moe.fused_expert_proj` and `moe.expert_merge` (the O projection, one
    reduction over heads × k routes) into `moe.fused_expert_merge`. Each
    fused op lowers to one row kernel that gathers the selected expert
    matrices, accumulates the projection in a vector register, scales by
    the gate and sums over routes, `k` expert matrices per token and head;
    the unfused ops lower in the dense all-experts formulation (every token
    through every expert of its head, `E/k` times the MACs, in matmul-like
    contractions), as PyTorch's dense implementation computes them. Ops whose accumulated width (the head
    width for V, the model width for O) is dynamic are left unfused.

    The gradients `moe.expert_proj_grad` and `moe.expert_merge_grad` (what
    `lm-differentiate` emits for the projections) become
    `moe.fused_expert_proj_grad` and `moe.fused_expert_merge_grad`: one row
    kernel per gradient (input, weight, gates), none of which builds the
    `[N, H, E, F]` all-experts tensors of the unfused lowering. The
    weight-gradient kernel scans every token for every expert row (dense,
    masked per route: the cost of the unfused lowering, not the `k/E` of
    sorted routes as in CVMM). Gradient ops whose expert weight
    has a dynamic width (dims 1 or 2) are left unfused. The pass belongs
    after `lm-differentiate` (the fused ops have no gradient rule).

    Before:

    ```mlir
    %v = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x8xf32>
    %dx, %dw, %dg = moe.expert_proj_grad %x, %w, %g, %i, %dv : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>
    ```

    After:

    ```mlir
    %v = moe.fused_expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x8xf32>
    %dx, %dw, %dg = moe.fused_expert_proj_grad %x, %w, %g, %i, %dv : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

def MoeFuseAttentionPass : Pass<"moe-fuse-attention"> {
  let summary = "Flash-style attention: moe.attention and its gradient "
                "without the T×S weights in memory";
  let description = [{
    Rewrites every `moe.attention` into `moe.flash_attention` (the same
    output, computed one query row at a time with an online softmax, plus
    the row logsumexp) and every `moe.attention_grad` into
    `moe.flash_attention_grad`, which recomputes the softmax weights from
    the logsumexp in the manner of FlashAttention-2. Causal masking, XL
    memory (more keys than queries) and relative keys carry over
    unchanged; RoPE is applied before attention by `moe.rope`. Neither op's
    lowering builds a `[B, H, T, S]` tensor.

    The gradient op takes the forward output and logsumexp from a
    `moe.flash_attention` of the same operands earlier in its block (after
    `lm-differentiate`, the `_grad` function holds both the forward op and
    its gradient); where there is none, a `moe.flash_attention` is inserted
    before the gradient to recompute them. The pass belongs after
    `lm-differentiate` (the flash ops have no gradient rule). Attention ops
    whose head width is dynamic, and those with an `at` position (a
    key/value cache's decoding step), are left unfused.

    Before:

    ```mlir
    %o = moe.attention %q, %k, %v : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>
    %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>
    ```

    After:

    ```mlir
    %o, %lse = moe.flash_attention %q, %k, %v : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2xf32>
    %dq, %dk, %dv = moe.flash_attention_grad %q, %k, %v, %o, %lse, %do : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::moe::MoeDialect"];
}

#endif // SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_TD

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
    lowering builds a `[B, T, S, H]` tensor.

    The gradient op takes the forward output and logsumexp from a
    `moe.flash_attention` of the same operands earlier in its block (after
    `lm-differentiate`, the `_grad` function holds both the forward op and
    its gradient); where there is none, a `moe.flash_attention` is inserted
    before the gradient to recompute them. The pass belongs after
    `lm-differentiate` (the flash ops have no gradient rule). Attention ops
    whose head width is dynamic are left unfused.

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

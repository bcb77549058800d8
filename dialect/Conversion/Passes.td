//===- Passes.td - Switchyard conversion passes ------------*- tablegen -*-===//
//
// Conversions out of the Switchyard dialects.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_CONVERSION_PASSES_TD
#define SWITCHYARD_DIALECT_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoeToLinalgPass : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower moe ops to reference linalg.generic on tensors";
  let description = [{
    Rewrites every `moe` op into `linalg.generic` ops on tensors (plus
    `tensor`, `arith`, `math` and, for top-k, `scf`): the reference
    lowering, one generic per contraction, used by the CPU target and as the
    unfused baseline. The expert projections take the dense all-experts
    formulation: every token through every expert of its head in one
    matmul-like contraction over the weight viewed as `[H, E, A, B]`, then a
    sum weighted by the dense gates `[N, H, E]` (0 for experts no route
    picks); all products accumulate in f32. With `grouped-experts` they
    take the grouped one instead (GroupedExperts.cpp): the routes sorted by
    expert, then one `[count_e, A] x [A, B]` matmul per expert on its
    contiguous block of gathered rows. Attention
    (`moe.attention`, `moe.attention_grad`) materialises the `[B, H, T, S]`
    score tensor, keys in the unit-stride dimension, with every product a
    contraction (Transformer-XL's relative keys: `q · relᵀ` over every
    distance, then a skew that reads each pair's distance); the flash-attention ops of `moe-fuse-attention` become
    row kernels instead (`scf.forall` over query or key rows, on `vector<F>`
    rows, with an online softmax), which never build it.

    Before:

    ```mlir
    %s = moe.gate %x, %w : tensor<?x16xf32>, tensor<6x16xf32> -> tensor<?x2x3xf32>
    ```

    After (abridged):

    ```mlir
    %logits = linalg.generic {iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : tensor<?x16xf32>, tensor<6x16xf32>) outs(%zero : tensor<?x6xf32>) {...}
    %sig = linalg.generic {iterator_types = ["parallel", "parallel"]} ins(%logits ...) {...}
    %s = tensor.expand_shape %sig [[0], [1, 2]] ... : tensor<?x6xf32> into tensor<?x2x3xf32>
    ```
  }];
  let options = [
    Option<"groupedExperts", "grouped-experts", "bool", /*default=*/"false",
           "Group the routes of moe.expert_proj, moe.expert_merge and their "
           "gradients by expert (the paper's CVMM): a counting sort of the "
           "routes, the rows gathered in that order, one matmul per expert "
           "on its block, the products summed back over the routes. Costs "
           "the routes' MACs (k/E of the dense formulation's); the sort and "
           "the blocks' sizes are read by host code, so a CPU formulation "
           "unless grouped-tile-rows is set">,
    Option<"groupedTileRows", "grouped-tile-rows", "int64_t", /*default=*/"0",
           "With grouped-experts, T > 0 takes the formulation without host "
           "reads (the GPU's): the sort computed in parallel, each expert's "
           "segment of rows padded to a multiple of T, the products as "
           "moe.grouped_matmul and moe.grouped_weight_grad; 0 reads the "
           "sort on the host">,
    Option<"flashAttentionKernel", "flash-attention-kernel", "bool",
           /*default=*/"false",
           "Rewrite moe.flash_attention and moe.flash_attention_grad "
           "(head width at most 128; with or without relative keys) to "
           "moe.flash_attention_kernel and moe.flash_attention_grad_kernel "
           "(the gradient's Δ = Σ dO·O a linalg reduction; the relative "
           "keys' gradient accumulated in f32), which survive "
           "bufferization for switchyard-gpu-tensor-core-matmul's mma.sync "
           "kernels, instead of row kernels; set by the GPU pipelines where "
           "matmuls run on tensor cores">,
    Option<"flashAttentionRounding", "flash-attention-rounding",
           "std::string", /*default=*/"\"f32\"",
           "bf16 or f16: the row kernels of the attention that the "
           "tensor-core kernels take (head width at most 128) round the "
           "factors those kernels round (Q, K, V, the relative keys, dO, the "
           "backward pass's weights P and dS), for the CPU reference of the "
           "GPU's bf16/f16 route; f32 (the default) rounds nothing">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::vector::VectorDialect"
  ];
}

#endif // SWITCHYARD_DIALECT_CONVERSION_PASSES_TD

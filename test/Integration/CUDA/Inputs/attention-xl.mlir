// Attention with relative keys (Transformer-XL) for the tensor-core flash
// attention (attention-xl.test): moe.attention with rel [S, H, F], which
// moe-fuse-attention makes moe.flash_attention and the GPU pipelines with
// tensor cores moe.flash_attention_kernel with rel. 70 queries with 100
// keys (XL memory: 30 keys ahead of the queries; two query blocks, the
// second partial, two key steps, distance windows reaching below 0 and past
// S) at head width 24 (padded to 32). The batch is dynamic.
// attention-xl-grad.mlir has the backward pass, attention-xl-wide.mlir the
// wider heads.
func.func @fwd_t70_s100_f24(%q: tensor<?x70x2x24xf32>, %k: tensor<?x100x2x24xf32>, %v: tensor<?x100x2x24xf32>, %r: tensor<100x2x24xf32>) -> tensor<?x70x2x24xf32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<100x2x24xf32>) : tensor<?x70x2x24xf32>, tensor<?x100x2x24xf32>, tensor<?x100x2x24xf32> -> tensor<?x70x2x24xf32>
  return %o : tensor<?x70x2x24xf32>
}

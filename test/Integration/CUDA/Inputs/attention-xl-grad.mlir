// The backward pass of attention with relative keys for the tensor-core
// flash attention (attention-xl.test): moe.attention_grad with rel, which
// moe-fuse-attention makes moe.flash_attention_grad (with a forward
// moe.flash_attention for its logsumexp) and the GPU pipelines with tensor
// cores moe.flash_attention_grad_kernel with rel (and the forward kernel).
// 70 queries with 100 keys at head width 24 (as attention-xl.mlir), and
// 130 queries and keys at width 32 (three blocks, for dQ and for dK, dV and
// drel). The batch is dynamic.
func.func @grad_t70_s100_f24(%q: tensor<?x70x2x24xf32>, %k: tensor<?x100x2x24xf32>, %v: tensor<?x100x2x24xf32>, %do: tensor<?x70x2x24xf32>, %r: tensor<100x2x24xf32>) -> (tensor<?x70x2x24xf32>, tensor<?x100x2x24xf32>, tensor<?x100x2x24xf32>, tensor<100x2x24xf32>) {
  %dq, %dk, %dv, %dr = moe.attention_grad %q, %k, %v, %do rel(%r : tensor<100x2x24xf32>) : tensor<?x70x2x24xf32>, tensor<?x100x2x24xf32>, tensor<?x100x2x24xf32>, tensor<?x70x2x24xf32> -> tensor<?x70x2x24xf32>, tensor<?x100x2x24xf32>, tensor<?x100x2x24xf32>, tensor<100x2x24xf32>
  return %dq, %dk, %dv, %dr : tensor<?x70x2x24xf32>, tensor<?x100x2x24xf32>, tensor<?x100x2x24xf32>, tensor<100x2x24xf32>
}
func.func @grad_t130_f32(%q: tensor<?x130x1x32xf32>, %k: tensor<?x130x1x32xf32>, %v: tensor<?x130x1x32xf32>, %do: tensor<?x130x1x32xf32>, %r: tensor<130x1x32xf32>) -> (tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32>, tensor<130x1x32xf32>) {
  %dq, %dk, %dv, %dr = moe.attention_grad %q, %k, %v, %do rel(%r : tensor<130x1x32xf32>) : tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32> -> tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32>, tensor<130x1x32xf32>
  return %dq, %dk, %dv, %dr : tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32>, tensor<130x1x32xf32>
}

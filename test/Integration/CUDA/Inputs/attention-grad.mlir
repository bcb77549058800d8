// Attention gradient shapes for the tensor-core flash attention's backward
// kernels (attention-grad.test): moe.attention_grad, which
// moe-fuse-attention makes moe.flash_attention_grad (with a forward
// moe.flash_attention for its logsumexp) and the GPU pipelines with tensor
// cores moe.flash_attention_grad_kernel. 130 queries and keys (three
// 64-row blocks, the last partial, for dQ and for dK and dV), and 17
// queries with 40 keys (XL memory: 23 keys ahead of the queries, seen by
// all of them) at head width 24 (padded to 32). The batch is dynamic.
// attention-grad-wide.mlir has the wider heads.
func.func @t130_f32(%q: tensor<?x130x2x32xf32>, %k: tensor<?x130x2x32xf32>, %v: tensor<?x130x2x32xf32>, %do: tensor<?x130x2x32xf32>) -> (tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32>) {
  %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32> -> tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32>
  return %dq, %dk, %dv : tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32>
}
func.func @t17_s40_f24(%q: tensor<?x17x3x24xf32>, %k: tensor<?x40x3x24xf32>, %v: tensor<?x40x3x24xf32>, %do: tensor<?x17x3x24xf32>) -> (tensor<?x17x3x24xf32>, tensor<?x40x3x24xf32>, tensor<?x40x3x24xf32>) {
  %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<?x17x3x24xf32>, tensor<?x40x3x24xf32>, tensor<?x40x3x24xf32>, tensor<?x17x3x24xf32> -> tensor<?x17x3x24xf32>, tensor<?x40x3x24xf32>, tensor<?x40x3x24xf32>
  return %dq, %dk, %dv : tensor<?x17x3x24xf32>, tensor<?x40x3x24xf32>, tensor<?x40x3x24xf32>
}

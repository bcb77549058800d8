// The wider heads of attention-xl.mlir (relative keys, tensor-core flash
// attention forward and backward), for a GPU: head widths 80 (the 47M
// configurations' 76, padded) and 128 (the widest the kernels take; their
// largest shared memory, 94 KiB, above the 48 KiB default); the forward
// pass at 130 queries and keys, width 32.
func.func @fwd_t130_f32(%q: tensor<?x130x1x32xf32>, %k: tensor<?x130x1x32xf32>, %v: tensor<?x130x1x32xf32>, %r: tensor<130x1x32xf32>) -> tensor<?x130x1x32xf32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<130x1x32xf32>) : tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32>, tensor<?x130x1x32xf32> -> tensor<?x130x1x32xf32>
  return %o : tensor<?x130x1x32xf32>
}
func.func @fwd_t100_s200_f76(%q: tensor<?x100x2x76xf32>, %k: tensor<?x200x2x76xf32>, %v: tensor<?x200x2x76xf32>, %r: tensor<200x2x76xf32>) -> tensor<?x100x2x76xf32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<200x2x76xf32>) : tensor<?x100x2x76xf32>, tensor<?x200x2x76xf32>, tensor<?x200x2x76xf32> -> tensor<?x100x2x76xf32>
  return %o : tensor<?x100x2x76xf32>
}
func.func @grad_t100_s200_f76(%q: tensor<?x100x2x76xf32>, %k: tensor<?x200x2x76xf32>, %v: tensor<?x200x2x76xf32>, %do: tensor<?x100x2x76xf32>, %r: tensor<200x2x76xf32>) -> (tensor<?x100x2x76xf32>, tensor<?x200x2x76xf32>, tensor<?x200x2x76xf32>, tensor<200x2x76xf32>) {
  %dq, %dk, %dv, %dr = moe.attention_grad %q, %k, %v, %do rel(%r : tensor<200x2x76xf32>) : tensor<?x100x2x76xf32>, tensor<?x200x2x76xf32>, tensor<?x200x2x76xf32>, tensor<?x100x2x76xf32> -> tensor<?x100x2x76xf32>, tensor<?x200x2x76xf32>, tensor<?x200x2x76xf32>, tensor<200x2x76xf32>
  return %dq, %dk, %dv, %dr : tensor<?x100x2x76xf32>, tensor<?x200x2x76xf32>, tensor<?x200x2x76xf32>, tensor<200x2x76xf32>
}
func.func @fwd_t70_s140_f128(%q: tensor<?x70x1x128xf32>, %k: tensor<?x140x1x128xf32>, %v: tensor<?x140x1x128xf32>, %r: tensor<140x1x128xf32>) -> tensor<?x70x1x128xf32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<140x1x128xf32>) : tensor<?x70x1x128xf32>, tensor<?x140x1x128xf32>, tensor<?x140x1x128xf32> -> tensor<?x70x1x128xf32>
  return %o : tensor<?x70x1x128xf32>
}
func.func @grad_t70_s140_f128(%q: tensor<?x70x1x128xf32>, %k: tensor<?x140x1x128xf32>, %v: tensor<?x140x1x128xf32>, %do: tensor<?x70x1x128xf32>, %r: tensor<140x1x128xf32>) -> (tensor<?x70x1x128xf32>, tensor<?x140x1x128xf32>, tensor<?x140x1x128xf32>, tensor<140x1x128xf32>) {
  %dq, %dk, %dv, %dr = moe.attention_grad %q, %k, %v, %do rel(%r : tensor<140x1x128xf32>) : tensor<?x70x1x128xf32>, tensor<?x140x1x128xf32>, tensor<?x140x1x128xf32>, tensor<?x70x1x128xf32> -> tensor<?x70x1x128xf32>, tensor<?x140x1x128xf32>, tensor<?x140x1x128xf32>, tensor<140x1x128xf32>
  return %dq, %dk, %dv, %dr : tensor<?x70x1x128xf32>, tensor<?x140x1x128xf32>, tensor<?x140x1x128xf32>, tensor<140x1x128xf32>
}

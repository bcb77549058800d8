// The wider heads of attention-grad.mlir's gradients: 70 queries with 100
// keys at head width 64, and 20 queries at 128 (the widest the kernels
// take). The batch is dynamic.
func.func @t70_s100_f64(%q: tensor<?x70x1x64xf32>, %k: tensor<?x100x1x64xf32>, %v: tensor<?x100x1x64xf32>, %do: tensor<?x70x1x64xf32>) -> (tensor<?x70x1x64xf32>, tensor<?x100x1x64xf32>, tensor<?x100x1x64xf32>) {
  %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<?x70x1x64xf32>, tensor<?x100x1x64xf32>, tensor<?x100x1x64xf32>, tensor<?x70x1x64xf32> -> tensor<?x70x1x64xf32>, tensor<?x100x1x64xf32>, tensor<?x100x1x64xf32>
  return %dq, %dk, %dv : tensor<?x70x1x64xf32>, tensor<?x100x1x64xf32>, tensor<?x100x1x64xf32>
}
func.func @t20_f128(%q: tensor<?x20x1x128xf32>, %k: tensor<?x20x1x128xf32>, %v: tensor<?x20x1x128xf32>, %do: tensor<?x20x1x128xf32>) -> (tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32>) {
  %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32> -> tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32>
  return %dq, %dk, %dv : tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32>
}

// Contractions that take sm_90a's wgmma + TMA kernels (wgmma.test): x·wᵀ
// through moe.linear with one and with three 64-wide steps of K and one
// and two 128-column tiles of N, and a plain A·B (linalg.matmul: B read
// along N); the row count M dynamic.

func.func @linear_n128_k64(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>) -> tensor<?x128xf32> {
  %y = moe.linear %x, %w : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
func.func @linear_n256_k192(%x: tensor<?x192xf32>, %w: tensor<256x192xf32>) -> tensor<?x256xf32> {
  %y = moe.linear %x, %w : tensor<?x192xf32>, tensor<256x192xf32> -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}
func.func @matmul_n128_k128(%a: tensor<?x128xf32>, %b: tensor<128x128xf32>) -> tensor<?x128xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x128xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x128xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x128xf32>) -> tensor<?x128xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x128xf32>, tensor<128x128xf32>) outs(%f : tensor<?x128xf32>) -> tensor<?x128xf32>
  return %r : tensor<?x128xf32>
}

// Contractions that take sm_90a's wgmma + TMA kernels (wgmma.test): x·wᵀ
// through moe.linear and a plain A·B (linalg.matmul: B read along N), the
// row count M dynamic. K from 24 (a part of one 64-wide step) to 412 (seven
// steps: the ring of four stages wraps and each stage's barrier changes
// phase); N from 33 to 256 (one partial and two whole 128-column tiles);
// K = 300 and 412, N = 33 and 200 none a multiple of the tiles.

func.func @linear_n128_k64(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>) -> tensor<?x128xf32> {
  %y = moe.linear %x, %w : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
func.func @linear_n256_k192(%x: tensor<?x192xf32>, %w: tensor<256x192xf32>) -> tensor<?x256xf32> {
  %y = moe.linear %x, %w : tensor<?x192xf32>, tensor<256x192xf32> -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}
func.func @linear_n200_k412(%x: tensor<?x412xf32>, %w: tensor<200x412xf32>) -> tensor<?x200xf32> {
  %y = moe.linear %x, %w : tensor<?x412xf32>, tensor<200x412xf32> -> tensor<?x200xf32>
  return %y : tensor<?x200xf32>
}
func.func @matmul_n128_k300(%a: tensor<?x300xf32>, %b: tensor<300x128xf32>) -> tensor<?x128xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x300xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x128xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x128xf32>) -> tensor<?x128xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x300xf32>, tensor<300x128xf32>) outs(%f : tensor<?x128xf32>) -> tensor<?x128xf32>
  return %r : tensor<?x128xf32>
}
func.func @matmul_n33_k24(%a: tensor<?x24xf32>, %b: tensor<24x33xf32>) -> tensor<?x33xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x24xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x33xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x33xf32>) -> tensor<?x33xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x24xf32>, tensor<24x33xf32>) outs(%f : tensor<?x33xf32>) -> tensor<?x33xf32>
  return %r : tensor<?x33xf32>
}

// Matmul shapes for the bf16/f16 tensor-core checks (matmuls.test): x·wᵀ
// through moe.linear and a plain A·B (linalg.matmul), N in {8, 33, 40} with
// K in {16, 24, 72}, and N = K = 72; the row count M dynamic
// (--dynamic-size 1, 17, 65, 130).

func.func @linear_n8_k16(%x: tensor<?x16xf32>, %w: tensor<8x16xf32>) -> tensor<?x8xf32> {
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func @matmul_n8_k16(%a: tensor<?x16xf32>, %b: tensor<16x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x16xf32>, tensor<16x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
func.func @linear_n8_k24(%x: tensor<?x24xf32>, %w: tensor<8x24xf32>) -> tensor<?x8xf32> {
  %y = moe.linear %x, %w : tensor<?x24xf32>, tensor<8x24xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func @matmul_n8_k24(%a: tensor<?x24xf32>, %b: tensor<24x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x24xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x24xf32>, tensor<24x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
func.func @linear_n8_k72(%x: tensor<?x72xf32>, %w: tensor<8x72xf32>) -> tensor<?x8xf32> {
  %y = moe.linear %x, %w : tensor<?x72xf32>, tensor<8x72xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func @matmul_n8_k72(%a: tensor<?x72xf32>, %b: tensor<72x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x72xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x72xf32>, tensor<72x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
func.func @linear_n33_k16(%x: tensor<?x16xf32>, %w: tensor<33x16xf32>) -> tensor<?x33xf32> {
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<33x16xf32> -> tensor<?x33xf32>
  return %y : tensor<?x33xf32>
}
func.func @matmul_n33_k16(%a: tensor<?x16xf32>, %b: tensor<16x33xf32>) -> tensor<?x33xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x33xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x33xf32>) -> tensor<?x33xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x16xf32>, tensor<16x33xf32>) outs(%f : tensor<?x33xf32>) -> tensor<?x33xf32>
  return %r : tensor<?x33xf32>
}
func.func @linear_n33_k24(%x: tensor<?x24xf32>, %w: tensor<33x24xf32>) -> tensor<?x33xf32> {
  %y = moe.linear %x, %w : tensor<?x24xf32>, tensor<33x24xf32> -> tensor<?x33xf32>
  return %y : tensor<?x33xf32>
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
func.func @linear_n33_k72(%x: tensor<?x72xf32>, %w: tensor<33x72xf32>) -> tensor<?x33xf32> {
  %y = moe.linear %x, %w : tensor<?x72xf32>, tensor<33x72xf32> -> tensor<?x33xf32>
  return %y : tensor<?x33xf32>
}
func.func @matmul_n33_k72(%a: tensor<?x72xf32>, %b: tensor<72x33xf32>) -> tensor<?x33xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x72xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x33xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x33xf32>) -> tensor<?x33xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x72xf32>, tensor<72x33xf32>) outs(%f : tensor<?x33xf32>) -> tensor<?x33xf32>
  return %r : tensor<?x33xf32>
}
func.func @linear_n40_k16(%x: tensor<?x16xf32>, %w: tensor<40x16xf32>) -> tensor<?x40xf32> {
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<40x16xf32> -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
func.func @matmul_n40_k16(%a: tensor<?x16xf32>, %b: tensor<16x40xf32>) -> tensor<?x40xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x40xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x40xf32>) -> tensor<?x40xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x16xf32>, tensor<16x40xf32>) outs(%f : tensor<?x40xf32>) -> tensor<?x40xf32>
  return %r : tensor<?x40xf32>
}
func.func @linear_n40_k24(%x: tensor<?x24xf32>, %w: tensor<40x24xf32>) -> tensor<?x40xf32> {
  %y = moe.linear %x, %w : tensor<?x24xf32>, tensor<40x24xf32> -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
func.func @matmul_n40_k24(%a: tensor<?x24xf32>, %b: tensor<24x40xf32>) -> tensor<?x40xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x24xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x40xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x40xf32>) -> tensor<?x40xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x24xf32>, tensor<24x40xf32>) outs(%f : tensor<?x40xf32>) -> tensor<?x40xf32>
  return %r : tensor<?x40xf32>
}
func.func @linear_n40_k72(%x: tensor<?x72xf32>, %w: tensor<40x72xf32>) -> tensor<?x40xf32> {
  %y = moe.linear %x, %w : tensor<?x72xf32>, tensor<40x72xf32> -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
func.func @matmul_n40_k72(%a: tensor<?x72xf32>, %b: tensor<72x40xf32>) -> tensor<?x40xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x72xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x40xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x40xf32>) -> tensor<?x40xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x72xf32>, tensor<72x40xf32>) outs(%f : tensor<?x40xf32>) -> tensor<?x40xf32>
  return %r : tensor<?x40xf32>
}
func.func @linear_n72_k72(%x: tensor<?x72xf32>, %w: tensor<72x72xf32>) -> tensor<?x72xf32> {
  %y = moe.linear %x, %w : tensor<?x72xf32>, tensor<72x72xf32> -> tensor<?x72xf32>
  return %y : tensor<?x72xf32>
}
func.func @matmul_n72_k72(%a: tensor<?x72xf32>, %b: tensor<72x72xf32>) -> tensor<?x72xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x72xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x72xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x72xf32>) -> tensor<?x72xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x72xf32>, tensor<72x72xf32>) outs(%f : tensor<?x72xf32>) -> tensor<?x72xf32>
  return %r : tensor<?x72xf32>
}

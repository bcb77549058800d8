// x·wᵀ (moe.linear) on column windows of a wider x: the tensor-core
// kernels read x through a view whose first element or row stride is not a
// multiple of the four-element runs that they load as one vector where a
// block's step lies inside the problem (matmuls.test). Offsets 1 and 2
// (first element not 16-byte aligned) and a row stride of 73 take the
// element-by-element loads; offset 4 with stride 76 the vector loads.

func.func @offset1_stride76(%x: tensor<?x76xf32>, %w: tensor<40x72xf32>) -> tensor<?x40xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x76xf32>
  %v = tensor.extract_slice %x[0, 1] [%m, 72] [1, 1] : tensor<?x76xf32> to tensor<?x72xf32>
  %y = moe.linear %v, %w : tensor<?x72xf32>, tensor<40x72xf32> -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
func.func @offset2_stride76(%x: tensor<?x76xf32>, %w: tensor<40x72xf32>) -> tensor<?x40xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x76xf32>
  %v = tensor.extract_slice %x[0, 2] [%m, 72] [1, 1] : tensor<?x76xf32> to tensor<?x72xf32>
  %y = moe.linear %v, %w : tensor<?x72xf32>, tensor<40x72xf32> -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
func.func @offset4_stride76(%x: tensor<?x76xf32>, %w: tensor<40x72xf32>) -> tensor<?x40xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x76xf32>
  %v = tensor.extract_slice %x[0, 4] [%m, 72] [1, 1] : tensor<?x76xf32> to tensor<?x72xf32>
  %y = moe.linear %v, %w : tensor<?x72xf32>, tensor<40x72xf32> -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}
func.func @offset0_stride73(%x: tensor<?x73xf32>, %w: tensor<40x72xf32>) -> tensor<?x40xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x73xf32>
  %v = tensor.extract_slice %x[0, 0] [%m, 72] [1, 1] : tensor<?x73xf32> to tensor<?x72xf32>
  %y = moe.linear %v, %w : tensor<?x72xf32>, tensor<40x72xf32> -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}

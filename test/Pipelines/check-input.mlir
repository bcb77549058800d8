// RUN: not switchyard-opt %s -split-input-file --switchyard-cpu-pipeline 2>&1 | FileCheck %s
// RUN: not switchyard-opt %s -split-input-file --switchyard-gpu-pipeline="chip=sm_90a format=isa" 2>&1 | FileCheck %s
// RUN: not switchyard-opt %s -split-input-file --switchyard-cpu-pipeline="train-step=1 fuse=all" 2>&1 | FileCheck %s

// Both pipelines start with switchyard-check-input: a constant dimension
// index outside the rank is an error, where the GPU pipeline's
// canonicalization crashed on it.
// CHECK: error: 'tensor.dim' op index -2 is outside the dimensions of its 'tensor<?x4xf32>' operand (0 to 1)
func.func @f(%t: tensor<?x4xf32>) -> index {
  %c = arith.constant -2 : index
  %d = tensor.dim %t, %c : tensor<?x4xf32>
  return %d : index
}

// -----

// An expand_shape whose output_shape contradicts its result type is an
// error, where bufferization made an invalid memref.expand_shape of it.
// CHECK: error: 'tensor.expand_shape' op output_shape gives dimension 1 the size 1, its result type 'tensor<1x8x5xf32>' 8
func.func @linear(%x: tensor<8x6xf32> {lm.param = "x"}, %w: tensor<5x6xf32> {lm.param = "w"}, %t: tensor<1x8xi32> {lm.vocab = 5 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<8x6xf32>, tensor<5x6xf32> -> tensor<8x5xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1, 5] : tensor<8x5xf32> into tensor<1x8x5xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x8x5xf32>, tensor<1x8xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

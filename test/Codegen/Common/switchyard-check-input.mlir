// RUN: switchyard-opt %s -split-input-file -switchyard-check-input -verify-diagnostics | FileCheck %s

// Valid input passes through unchanged.
// CHECK-LABEL: func.func @valid
// CHECK: tensor.dim %{{.*}}, %{{.*}} : tensor<?x4xf32>
func.func @valid(%t: tensor<?x4xf32>) -> index {
  %c = arith.constant 1 : index
  %d = tensor.dim %t, %c : tensor<?x4xf32>
  return %d : index
}

// -----

// A constant dimension index outside the rank (fuzzing found the GPU
// pipeline's canonicalization crashing on it).
func.func @negative(%t: tensor<?x4xf32>) -> index {
  %c = arith.constant -2 : index
  // expected-error @+1 {{'tensor.dim' op index -2 is outside the dimensions of its 'tensor<?x4xf32>' operand (0 to 1)}}
  %d = tensor.dim %t, %c : tensor<?x4xf32>
  return %d : index
}

// -----

func.func @past_rank(%m: memref<?x4xf32>) -> index {
  %c = arith.constant 2 : index
  // expected-error @+1 {{'memref.dim' op index 2 is outside the dimensions of its 'memref<?x4xf32>' operand (0 to 1)}}
  %d = memref.dim %m, %c : memref<?x4xf32>
  return %d : index
}

// -----

// An expand_shape whose output_shape disagrees with its result type
// (fuzzing found bufferization turning it into an invalid memref op).
func.func @expand_sizes(%y: tensor<8x5xf32>) -> tensor<1x8x5xf32> {
  // expected-error @+1 {{'tensor.expand_shape' op output_shape gives dimension 1 the size 1, its result type 'tensor<1x8x5xf32>' 8}}
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1, 5] : tensor<8x5xf32> into tensor<1x8x5xf32>
  return %l : tensor<1x8x5xf32>
}

// -----

// CHECK-LABEL: func.func @expand_valid
// CHECK: tensor.expand_shape
func.func @expand_valid(%y: tensor<8x5xf32>) -> tensor<1x8x5xf32> {
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 8, 5] : tensor<8x5xf32> into tensor<1x8x5xf32>
  return %l : tensor<1x8x5xf32>
}

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

// RUN: not switchyard-opt %s --switchyard-cpu-pipeline 2>&1 | FileCheck %s
// RUN: not switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_90a format=isa" 2>&1 | FileCheck %s

// Both pipelines start with switchyard-check-input: a constant dimension
// index outside the rank is an error, where the GPU pipeline's
// canonicalization crashed on it.
// CHECK: error: 'tensor.dim' op index -2 is outside the dimensions of its 'tensor<?x4xf32>' operand (0 to 1)
func.func @f(%t: tensor<?x4xf32>) -> index {
  %c = arith.constant -2 : index
  %d = tensor.dim %t, %c : tensor<?x4xf32>
  return %d : index
}

// RUN: not switchyard-opt %s --convert-moe-to-linalg 2>&1 | FileCheck %s

// The dense lowering of the expert projections needs a static head count
// (lm-decompose-layers always gives one): a dynamic one is an error, not a
// crash further down.
// CHECK: error: failed to legalize operation 'moe.expert_proj'
func.func @dynamic_heads(%x: tensor<?x16xf32>, %wv: tensor<10x16x8xf32>, %g: tensor<?x?x3xf32>, %i: tensor<?x?x3xi32>) -> tensor<?x?x8xf32> {
  %p = moe.expert_proj %x, %wv, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x?x3xf32>, tensor<?x?x3xi32> -> tensor<?x?x8xf32>
  return %p : tensor<?x?x8xf32>
}

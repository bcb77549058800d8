// RUN: switchyard-opt %s -lm-materialize-params -lm-decompose-layers -convert-lm-to-func | FileCheck %s

// A decomposed model becomes a function taking its parameters, in
// declaration order, after its own arguments. All arguments are read-only
// caller buffers; token ids carry their vocabulary.
// CHECK-LABEL: func.func @m(
// CHECK-SAME: %[[T:.*]]: tensor<2x4xi32> {bufferization.writable = false, lm.vocab = 64 : i64},
// CHECK-SAME: %[[E:.*]]: tensor<64x8xf32> {bufferization.writable = false, lm.param = "embed.weight"},
// CHECK-SAME: %[[O:.*]]: tensor<64x8xf32> {bufferization.writable = false, lm.param = "out.weight"})
// CHECK-SAME: -> tensor<2x4x64xf32> attributes {llvm.emit_c_interface}
// CHECK: moe.embed %[[E]], %[[T]]
// CHECK: moe.linear %{{.*}}, %[[O]]
// CHECK: return %{{.*}} : tensor<2x4x64xf32>
// CHECK-NOT: lm.
lm.model @m(%t: tensor<2x4xi32>) -> tensor<2x4x64xf32> {
  %x = lm.embed "embed" %t {vocab = 64} : tensor<2x4xi32> -> tensor<2x4x8xf32>
  %l = lm.output "out" %x {vocab = 64} : tensor<2x4x8xf32> -> tensor<2x4x64xf32>
  lm.return %l : tensor<2x4x64xf32>
}

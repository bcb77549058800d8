// RUN: switchyard-opt %s -lm-materialize-params -lm-outline-layers -lm-decompose-layers -convert-lm-to-func -lm-hoist-block-invariants -cse | FileCheck %s

// The XL sinusoids, computed from constants alone, leave the attention
// block's function: they become its last argument, computed once in the
// model (CSE merges the copies before each call) and passed to each layer.
// CHECK-LABEL: func.func private @x__switchhead(
// CHECK-SAME: %[[PE:[a-z0-9]+]]: tensor<8x16xf32> {bufferization.writable = false, lm.invariant})
// CHECK-NOT: math.sin
// CHECK: moe.linear %[[PE]]
// CHECK-LABEL: func.func @x(
// CHECK: math.sin
// CHECK-NOT: math.sin
// CHECK: %[[A0:.*]] = call @x__switchhead({{.*}}, %[[TABLE:[a-z0-9_]+]])
// CHECK: call @x__switchhead(%[[A0]], {{.*}}, %[[TABLE]])
lm.model @x(%t: tensor<?x4xi32>, %m0: tensor<?x4x16xf32>, %m1: tensor<?x4x16xf32>) -> tensor<?x4x64xf32> {
  %x0 = lm.embed "embed" %t {vocab = 64} : tensor<?x4xi32> -> tensor<?x4x16xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x4x16xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x16xf32>
  %a1 = lm.switchhead "layers.1.att" %a0 memory(%m1 : tensor<?x4x16xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x16xf32>
  %l = lm.output "out" %a1 {vocab = 64} : tensor<?x4x16xf32> -> tensor<?x4x64xf32>
  lm.return %l : tensor<?x4x64xf32>
}

// RUN: switchyard-opt %s -split-input-file -lm-materialize-params -lm-outline-layers | FileCheck %s
// RUN: switchyard-opt %s -split-input-file -lm-materialize-params -lm-outline-layers -lm-decompose-layers -convert-lm-to-func | FileCheck %s --check-prefix=DECOMPOSED

// Blocks of one op, attributes and types share a function; the layer name
// does not count. Each call passes the block's operands (the XL memory
// too), then its own parameters. Embedding, norm and output stay inline.
// CHECK-LABEL: func.func private @m__switchhead(
// CHECK-SAME: %{{.*}}: tensor<?x4x16xf32> {bufferization.writable = false}, %{{.*}}: tensor<?x4x16xf32> {bufferization.writable = false},
// CHECK-SAME: {bufferization.writable = false, lm.layer_param = "norm.weight"}
// CHECK-SAME: attributes {lm.layer}
// CHECK: lm.switchhead "layers.0.att" %arg0 memory(%arg1
// CHECK-LABEL: func.func private @m__ffn(
// CHECK: lm.ffn "layers.0.ffn"
// A block of the same op with other attributes gets a function of its own.
// CHECK-LABEL: func.func private @m__ffn_1(
// CHECK: lm.ffn "layers.1.ffn" %arg0 {d_ff = 64 : i64}
// CHECK-LABEL: lm.model @m(
// CHECK: lm.embed
// CHECK: %[[W0:.*]] = lm.get_param @layers.0.att.norm.weight
// CHECK: %[[A0:.*]] = func.call @m__switchhead(%{{.*}}, %arg1, %[[W0]],
// CHECK: %[[X1:.*]] = func.call @m__ffn(%[[A0]],
// CHECK: %[[W1:.*]] = lm.get_param @layers.1.att.norm.weight
// CHECK: %[[A1:.*]] = func.call @m__switchhead(%[[X1]], %arg2, %[[W1]],
// CHECK: func.call @m__ffn_1(%[[A1]],
// CHECK: lm.layer_norm "norm"
// CHECK-NOT: call
// CHECK: lm.return

// Decomposed in their functions, reading the parameters from arguments;
// the model converted to a function with parameter arguments.
// DECOMPOSED-LABEL: func.func private @m__switchhead(
// DECOMPOSED-NOT: lm.get_param
// DECOMPOSED: moe.expert_proj
// DECOMPOSED-LABEL: func.func @m(
// DECOMPOSED-SAME: {bufferization.writable = false, lm.param = "layers.0.att.norm.weight"}
// DECOMPOSED: call @m__switchhead(
lm.model @m(%t: tensor<?x4xi32>, %m0: tensor<?x4x16xf32>, %m1: tensor<?x4x16xf32>) -> tensor<?x4x64xf32> {
  %x0 = lm.embed "embed" %t {vocab = 64} : tensor<?x4xi32> -> tensor<?x4x16xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x4x16xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x16xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 32} : tensor<?x4x16xf32>
  %a1 = lm.switchhead "layers.1.att" %x1 memory(%m1 : tensor<?x4x16xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x16xf32>
  %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 64} : tensor<?x4x16xf32>
  %h = lm.layer_norm "norm" %x2 : tensor<?x4x16xf32>
  %l = lm.output "out" %h {vocab = 64} : tensor<?x4x16xf32> -> tensor<?x4x64xf32>
  lm.return %l : tensor<?x4x64xf32>
}

// -----

// A name that is taken is not reused.
// CHECK-LABEL: func.func private @n__mha(
// CHECK-SAME: tensor<1x4xf32>
// CHECK-LABEL: func.func private @n__mha_0(
// CHECK: lm.mha "layers.0.att"
// CHECK-LABEL: lm.model @n(
// CHECK: func.call @n__mha_0(
func.func private @n__mha(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  return %x : tensor<1x4xf32>
}
lm.model @n(%h: tensor<?x4x16xf32>) -> tensor<?x4x16xf32> {
  %a0 = lm.mha "layers.0.att" %h {heads = 2, head_dim = 8} : tensor<?x4x16xf32>
  lm.return %a0 : tensor<?x4x16xf32>
}

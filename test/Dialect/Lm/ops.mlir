// RUN: switchyard-opt %s | FileCheck %s
// RUN: switchyard-opt %s | switchyard-opt | FileCheck %s
// RUN: switchyard-opt %s --mlir-print-op-generic | switchyard-opt | FileCheck %s

// Every layer kind in one model, with default attributes elided on print.
// CHECK-LABEL: lm.model @every_layer
// CHECK-SAME: (%[[T:.*]]: tensor<?x16xi32>) -> tensor<?x16x256xf32>
lm.model @every_layer(%tokens: tensor<?x16xi32>) -> tensor<?x16x256xf32> {
  // CHECK: %[[E:.*]] = lm.embed "embed" %[[T]] {vocab = 256 : i64} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  %x = lm.embed "embed" %tokens {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  // CHECK: %[[A0:.*]] = lm.mha "layers.0.att" %[[E]] {head_dim = 8 : i64, heads = 4 : i64, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
  %a0 = lm.mha "layers.0.att" %x {heads = 4, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
  // CHECK: %[[F0:.*]] = lm.ffn "layers.0.ffn" %[[A0]] {d_ff = 128 : i64} : tensor<?x16x32xf32>
  %f0 = lm.ffn "layers.0.ffn" %a0 {d_ff = 128} : tensor<?x16x32xf32>
  // CHECK: %[[A1:.*]] = lm.switchhead "layers.1.att" %[[F0]] {experts = 5 : i64, head_dim = 8 : i64, heads = 2 : i64, k = 3 : i64} : tensor<?x16x32xf32>
  %a1 = lm.switchhead "layers.1.att" %f0 {heads = 2, experts = 5, k = 3, head_dim = 8, pos = #lm.pos<none>, expert_dropout = 0.0} : tensor<?x16x32xf32>
  // CHECK: %[[F1:.*]] = lm.sigma_moe "layers.1.ffn" %[[A1]] {expert_dim = 16 : i64, expert_dropout = 1.000000e-01 : f64, experts = 8 : i64, k = 2 : i64} : tensor<?x16x32xf32>
  %f1 = lm.sigma_moe "layers.1.ffn" %a1 {experts = 8, k = 2, expert_dim = 16, expert_dropout = 0.1} : tensor<?x16x32xf32>
  // CHECK: %[[N:.*]] = lm.layer_norm "norm" %[[F1]] : tensor<?x16x32xf32>
  %n = lm.layer_norm "norm" %f1 {eps = 1.0e-5} : tensor<?x16x32xf32>
  // CHECK: %[[L:.*]] = lm.output "out" %[[N]] {vocab = 256 : i64} : tensor<?x16x32xf32> -> tensor<?x16x256xf32>
  %l = lm.output "out" %n {vocab = 256} : tensor<?x16x32xf32> -> tensor<?x16x256xf32>
  // CHECK: lm.return %[[L]] : tensor<?x16x256xf32>
  lm.return %l : tensor<?x16x256xf32>
}

// A decoding step: attention blocks over key/value caches at a position.
// CHECK-LABEL: lm.model @step
// CHECK-SAME: (%[[T:.*]]: tensor<1x1xi32>, %[[P:.*]]: tensor<i32>, %[[K0:.*]]: tensor<1x16x2x8xf32>, %[[V0:.*]]: tensor<1x16x2x8xf32>, %[[K1:.*]]: tensor<1x16x4x4xf32>, %[[V1:.*]]: tensor<1x16x4x4xf32>)
lm.model @step(%t: tensor<1x1xi32>, %p: tensor<i32>, %k0: tensor<1x16x2x8xf32>, %v0: tensor<1x16x2x8xf32>, %k1: tensor<1x16x4x4xf32>, %v1: tensor<1x16x4x4xf32>) -> (tensor<1x1x64xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) {
  %x = lm.embed "embed" %t {vocab = 64} : tensor<1x1xi32> -> tensor<1x1x16xf32>
  // CHECK: %{{.*}}, %[[NK0:.*]], %[[NV0:.*]] = lm.switchhead "att0" %{{.*}} cache(%[[K0]], %[[V0]] at %[[P]] : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<i32> -> tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>) {experts = 3 : i64, head_dim = 8 : i64, heads = 2 : i64, k = 2 : i64, pos = #lm.pos<rope>} : tensor<1x1x16xf32>
  %a, %nk0, %nv0 = lm.switchhead "att0" %x cache(%k0, %v0 at %p : tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<i32> -> tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>) {heads = 2, experts = 3, k = 2, head_dim = 8, pos = #lm.pos<rope>} : tensor<1x1x16xf32>
  // CHECK: %{{.*}}, %[[NK1:.*]], %[[NV1:.*]] = lm.mha "att1" %{{.*}} cache(%[[K1]], %[[V1]] at %[[P]] : tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>, tensor<i32> -> tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) {head_dim = 4 : i64, heads = 4 : i64} : tensor<1x1x16xf32>
  %b, %nk1, %nv1 = lm.mha "att1" %a cache(%k1, %v1 at %p : tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>, tensor<i32> -> tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) {heads = 4, head_dim = 4} : tensor<1x1x16xf32>
  %l = lm.output "out" %b {vocab = 64} : tensor<1x1x16xf32> -> tensor<1x1x64xf32>
  // CHECK: lm.return %{{.*}}, %[[NK0]], %[[NV0]], %[[NK1]], %[[NV1]]
  lm.return %l, %nk0, %nv0, %nk1, %nv1 : tensor<1x1x64xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>
}

// Transformer-XL attention with memory operands, k = E, a non-default eps.
// CHECK-LABEL: lm.model @xl
// CHECK-SAME: (%[[T:.*]]: tensor<2x8xi64>, %[[M0:.*]]: tensor<2x8x16xbf16>, %[[M1:.*]]: tensor<2x8x16xbf16>)
lm.model @xl(%tokens: tensor<2x8xi64>, %m0: tensor<2x8x16xbf16>, %m1: tensor<2x8x16xbf16>) -> (tensor<2x8x100xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) {
  %x = lm.embed "tok" %tokens {vocab = 100} : tensor<2x8xi64> -> tensor<2x8x16xbf16>
  // CHECK: lm.switchhead "blocks.0.attn" %{{.*}} memory(%[[M0]] : tensor<2x8x16xbf16>) {experts = 4 : i64, head_dim = 4 : i64, heads = 1 : i64, k = 4 : i64, pos = #lm.pos<xl>} : tensor<2x8x16xbf16>
  %a = lm.switchhead "blocks.0.attn" %x memory(%m0 : tensor<2x8x16xbf16>) {heads = 1, experts = 4, k = 4, head_dim = 4, pos = #lm.pos<xl>} : tensor<2x8x16xbf16>
  // CHECK: lm.mha "blocks.1.attn" %{{.*}} memory(%[[M1]] : tensor<2x8x16xbf16>) {head_dim = 2 : i64, heads = 8 : i64, pos = #lm.pos<xl>} : tensor<2x8x16xbf16>
  %b = lm.mha "blocks.1.attn" %a memory(%m1 : tensor<2x8x16xbf16>) {heads = 8, head_dim = 2, pos = #lm.pos<xl>} : tensor<2x8x16xbf16>
  // CHECK: lm.layer_norm "final_norm" %{{.*}} {eps = 9.9999999999999995E-7 : f64} : tensor<2x8x16xbf16>
  %n = lm.layer_norm "final_norm" %b {eps = 1.0e-6} : tensor<2x8x16xbf16>
  %l = lm.output "head" %n {vocab = 100} : tensor<2x8x16xbf16> -> tensor<2x8x100xbf16>
  // CHECK: lm.return %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x100xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>
  lm.return %l, %x, %a : tensor<2x8x100xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>
}

// Parameters declared by hand and read with lm.get_param; the loss.
// CHECK: lm.param @out.weight : tensor<256x32xf32> init <normal, std = 1.250000e-01>
lm.param @out.weight : tensor<256x32xf32> init #lm.init<normal, std = 0.125>
// CHECK: lm.param @router : tensor<8x32xf32> init <row_normal, std = 5.000000e-01>
lm.param @router : tensor<8x32xf32> init <row_normal, std = 0.5>
// CHECK: lm.param @scale : tensor<32xf32> init <ones>
lm.param @scale : tensor<32xf32> init <ones>
// CHECK: lm.param @shift : tensor<32xf32> init <zeros>{{$}}
lm.param @shift : tensor<32xf32> init <zeros>
// CHECK: lm.param @att.pos : tensor<8x32xf32> init <zeros> alias "att.pos_to_pk"
lm.param @att.pos : tensor<8x32xf32> init <zeros> alias "att.pos_to_pk"

// CHECK-LABEL: func.func @loss
func.func @loss(%logits: tensor<?x16x256xf32>, %targets: tensor<?x16xi32>) -> tensor<f32> {
  // CHECK: lm.get_param @out.weight : tensor<256x32xf32>
  %w = lm.get_param @out.weight : tensor<256x32xf32>
  // CHECK: lm.cross_entropy %{{.*}}, %{{.*}} : tensor<?x16x256xf32>, tensor<?x16xi32> -> tensor<f32>
  %loss = lm.cross_entropy %logits, %targets : tensor<?x16x256xf32>, tensor<?x16xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// A stack of blocks: hidden states in and out, no embedding or head.
// CHECK-LABEL: lm.model @blocks(%{{.*}}: tensor<?x8x16xf32>) -> tensor<?x8x16xf32>
lm.model @blocks(%x: tensor<?x8x16xf32>) -> tensor<?x8x16xf32> {
  %a = lm.switchhead "layers.0.att" %x {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x8x16xf32>
  %f = lm.sigma_moe "layers.0.ffn" %a {experts = 4, k = 2, expert_dim = 8} : tensor<?x8x16xf32>
  lm.return %f : tensor<?x8x16xf32>
}

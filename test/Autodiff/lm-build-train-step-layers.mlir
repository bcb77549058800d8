// RUN: switchyard-opt %s -lm-materialize-params -lm-outline-layers -lm-decompose-layers -convert-lm-to-func -lm-differentiate -lm-build-train-step -split-input-file | FileCheck %s

// Layers of an attention block and a feed-forward block: the block calls
// repeat a pattern of two, so each layer's parameters (the attention
// block's six, the feed-forward block's four) go to one pair of
// optimizer functions named after both blocks, called once per layer.
// CHECK-LABEL: func.func private @m__mha_ffn_sum_squares(
// CHECK-SAME: -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
// CHECK-LABEL: func.func private @m__mha_ffn_adamw(
// CHECK-COUNT-10: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK-LABEL: func.func @m_train_step(
// CHECK-COUNT-2: call @m__mha_ffn_sum_squares(
// CHECK-COUNT-2: call @m__mha_ffn_adamw(
// CHECK-NOT: call @m__mha_adamw(
// CHECK-NOT: call @m__ffn_adamw(
lm.model @m(%t: tensor<?x4xi32>) -> tensor<?x4x64xf32> {
  %x0 = lm.embed "embed" %t {vocab = 64} : tensor<?x4xi32> -> tensor<?x4x16xf32>
  %a0 = lm.mha "layers.0.att" %x0 {heads = 2, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x4x16xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 32} : tensor<?x4x16xf32>
  %a1 = lm.mha "layers.1.att" %x1 {heads = 2, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x4x16xf32>
  %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 32} : tensor<?x4x16xf32>
  %l = lm.output "out" %x2 {vocab = 64} : tensor<?x4x16xf32> -> tensor<?x4x64xf32>
  lm.return %l : tensor<?x4x64xf32>
}

// -----

// No pattern that repeats (two feed-forward blocks, then an attention
// block): each block call keeps its own optimizer functions.
// CHECK-LABEL: func.func @n_train_step(
// CHECK-COUNT-2: call @n__ffn_sum_squares(
// CHECK: call @n__mha_sum_squares(
// CHECK-COUNT-2: call @n__ffn_adamw(
// CHECK: call @n__mha_adamw(
lm.model @n(%t: tensor<?x4xi32>) -> tensor<?x4x64xf32> {
  %x0 = lm.embed "embed" %t {vocab = 64} : tensor<?x4xi32> -> tensor<?x4x16xf32>
  %x1 = lm.ffn "layers.0.ffn" %x0 {d_ff = 32} : tensor<?x4x16xf32>
  %x2 = lm.ffn "layers.1.ffn" %x1 {d_ff = 32} : tensor<?x4x16xf32>
  %a0 = lm.mha "layers.2.att" %x2 {heads = 2, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x4x16xf32>
  %l = lm.output "out" %a0 {vocab = 64} : tensor<?x4x16xf32> -> tensor<?x4x64xf32>
  lm.return %l : tensor<?x4x64xf32>
}

// RUN: switchyard-opt %s -split-input-file -lm-materialize-params -lm-build-decoder | FileCheck %s
// RUN: switchyard-opt %s -split-input-file -lm-materialize-params -lm-build-decoder -lm-outline-layers -lm-decompose-layers -convert-lm-to-func | FileCheck %s --check-prefix=DECOMPOSED

// The model stays; its decoding step follows it: the token [1, 1], its
// position, keys and values caches [1, T, H, F] per attention block in
// order; the logits [1, 1, V] and the caches the blocks return. Every
// other layer runs on the one token.
// CHECK-LABEL: lm.model @m(%{{.*}}: tensor<?x8xi32>) -> tensor<?x8x16xf32>
// CHECK: lm.switchhead "layers.0.att" %{{.*}} {experts
// CHECK-LABEL: lm.model @m_decode(
// CHECK-SAME: %[[T:.*]]: tensor<1x1xi32>, %[[P:.*]]: tensor<i32>,
// CHECK-SAME: %[[K0:.*]]: tensor<1x8x2x4xf32>, %[[V0:.*]]: tensor<1x8x2x4xf32>,
// CHECK-SAME: %[[K1:.*]]: tensor<1x8x3x4xf32>, %[[V1:.*]]: tensor<1x8x3x4xf32>)
// CHECK-SAME: -> (tensor<1x1x16xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x3x4xf32>, tensor<1x8x3x4xf32>)
// CHECK-SAME: attributes {lm.decoder = "m"}
// CHECK: %[[X0:.*]] = lm.embed "embed" %[[T]] {vocab = 16 : i64} : tensor<1x1xi32> -> tensor<1x1x12xf32>
// CHECK: %[[A0:.*]], %[[NK0:.*]], %[[NV0:.*]] = lm.switchhead "layers.0.att" %[[X0]] cache(%[[K0]], %[[V0]] at %[[P]] : {{.*}}) {{.*}} : tensor<1x1x12xf32>
// CHECK: %[[X1:.*]] = lm.sigma_moe "layers.0.ffn" %[[A0]] {{.*}} : tensor<1x1x12xf32>
// CHECK: %[[A1:.*]], %[[NK1:.*]], %[[NV1:.*]] = lm.mha "layers.1.att" %[[X1]] cache(%[[K1]], %[[V1]] at %[[P]] : {{.*}}) {{.*}} : tensor<1x1x12xf32>
// CHECK: %[[L:.*]] = lm.output "out" %{{.*}} {vocab = 16 : i64} : tensor<1x1x12xf32> -> tensor<1x1x16xf32>
// CHECK: lm.return %[[L]], %[[NK0]], %[[NV0]], %[[NK1]], %[[NV1]]

// Decomposed, each cached block rotates the token's query and key at the
// position, writes the key and value into the caches' row at the position
// (a pass over each cache that selects the new row there) and attends to
// the rows up to it; the step's function keeps its mark
// (lm-differentiate leaves it alone).
// DECOMPOSED-LABEL: func.func private @m_decode__switchhead(
// DECOMPOSED-SAME: %{{.*}}: tensor<1x1x12xf32> {{.*}}, %[[K:.*]]: tensor<1x8x2x4xf32> {{.*}}, %[[V:.*]]: tensor<1x8x2x4xf32> {{.*}}, %[[P:.*]]: tensor<i32>
// DECOMPOSED: %[[S:.*]] = tensor.extract %[[P]][] : tensor<i32>
// DECOMPOSED: %[[I:.*]] = arith.index_cast %[[S]] : i32 to index
// DECOMPOSED: %[[Q:.*]] = moe.rope %{{.*}} at %[[I]] : tensor<1x1x2x4xf32>
// DECOMPOSED: %[[KR:.*]] = moe.rope %{{.*}} at %[[I]] : tensor<1x1x2x4xf32>
// DECOMPOSED: %[[NK:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<i32>) outs(%[[K]] : tensor<1x8x2x4xf32>)
// DECOMPOSED: arith.select
// DECOMPOSED: %[[NV:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<i32>) outs(%[[V]] : tensor<1x8x2x4xf32>)
// DECOMPOSED: moe.attention %[[Q]], %[[NK]], %[[NV]] at %[[I]] : tensor<1x1x2x4xf32>, tensor<1x8x2x4xf32>, tensor<1x8x2x4xf32> -> tensor<1x1x2x4xf32>
// DECOMPOSED: return %{{.*}}, %[[NK]], %[[NV]]
// DECOMPOSED-LABEL: func.func @m_decode(
// DECOMPOSED-SAME: attributes {{{.*}}lm.decoder = "m"
lm.model @m(%t: tensor<?x8xi32>) -> tensor<?x8x16xf32> {
  %x0 = lm.embed "embed" %t {vocab = 16} : tensor<?x8xi32> -> tensor<?x8x12xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x8x12xf32>
  %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 4, k = 2, expert_dim = 6} : tensor<?x8x12xf32>
  %a1 = lm.mha "layers.1.att" %x1 {heads = 3, head_dim = 4} : tensor<?x8x12xf32>
  %h = lm.layer_norm "norm" %a1 : tensor<?x8x12xf32>
  %l = lm.output "out" %h {vocab = 16} : tensor<?x8x12xf32> -> tensor<?x8x16xf32>
  lm.return %l : tensor<?x8x16xf32>
}

// -----

// A model with memories, one with XL positions, one that returns more
// than its logits: no decoding step.
// CHECK-NOT: _decode
lm.model @xl(%t: tensor<?x4xi32>, %m0: tensor<?x4x8xf32>) -> (tensor<?x4x16xf32>, tensor<?x4x8xf32>) {
  %x0 = lm.embed "embed" %t {vocab = 16} : tensor<?x4xi32> -> tensor<?x4x8xf32>
  %a0 = lm.mha "layers.0.att" %x0 memory(%m0 : tensor<?x4x8xf32>) {heads = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x8xf32>
  %l = lm.output "out" %a0 {vocab = 16} : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
  lm.return %l, %x0 : tensor<?x4x16xf32>, tensor<?x4x8xf32>
}
lm.model @xl_no_memory(%t: tensor<?x4xi32>) -> tensor<?x4x16xf32> {
  %x0 = lm.embed "embed2" %t {vocab = 16} : tensor<?x4xi32> -> tensor<?x4x8xf32>
  %a0 = lm.mha "att2" %x0 {heads = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x8xf32>
  %l = lm.output "out2" %a0 {vocab = 16} : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
  lm.return %l : tensor<?x4x16xf32>
}
lm.model @two_results(%t: tensor<?x4xi32>) -> (tensor<?x4x16xf32>, tensor<?x4x8xf32>) {
  %x0 = lm.embed "embed3" %t {vocab = 16} : tensor<?x4xi32> -> tensor<?x4x8xf32>
  %l = lm.output "out3" %x0 {vocab = 16} : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
  lm.return %l, %x0 : tensor<?x4x16xf32>, tensor<?x4x8xf32>
}

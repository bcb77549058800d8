// RUN: switchyard-opt %s -split-input-file -lm-differentiate | FileCheck %s
// Idempotent: a second run (or one after the train step) adds nothing.
// RUN: switchyard-opt %s -split-input-file -lm-differentiate -lm-differentiate -lm-build-train-step -lm-differentiate -lm-build-train-step | FileCheck %s --check-prefix=ONCE
// ONCE-COUNT-1: func.func @f_grad(
// ONCE-COUNT-1: func.func @f_train_step(
// ONCE-NOT: _grad_grad
// ONCE-NOT: _train_step_grad

// A function returning a loss: its _grad returns the loss and one gradient
// per parameter, in argument order; data arguments get none.
// CHECK-LABEL: func.func @f(
// CHECK-LABEL: func.func @f_grad(
// CHECK-SAME: %[[X:.*]]: tensor<4x6xf32> {lm.param = "x"}, %[[W:.*]]: tensor<5x6xf32> {lm.param = "w"}, %[[T:.*]]: tensor<1x4xi32>)
// CHECK-SAME: -> (tensor<f32>, tensor<4x6xf32>, tensor<5x6xf32>)
// The forward computation, then the reverse sweep seeded with d(loss) = 1.
// CHECK: %[[Y:.*]] = moe.linear %[[X]], %[[W]]
// CHECK: %[[LOSS:.*]] = moe.cross_entropy
// CHECK: arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: return %[[LOSS]], %{{.*}}, %{{.*}} : tensor<f32>, tensor<4x6xf32>, tensor<5x6xf32>
func.func @f(%x: tensor<4x6xf32> {lm.param = "x"}, %w: tensor<5x6xf32> {lm.param = "w"}, %t: tensor<1x4xi32>) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<4x6xf32>, tensor<5x6xf32> -> tensor<4x5xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 4, 5] : tensor<4x5xf32> into tensor<1x4x5xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x4x5xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A model returning logits (and a memory): the loss is the cross-entropy
// against a new last argument, the targets; the memory gets no gradient.
// A parameter the loss does not use gets a zero gradient.
// CHECK-LABEL: func.func @m_grad(
// CHECK-SAME: %[[T:.*]]: tensor<?x4xi32>, %[[E:.*]]: tensor<16x8xf32> {lm.param = "embed.weight"}, %[[U:.*]]: tensor<3xf32> {lm.param = "unused"}, %[[TG:.*]]: tensor<?x4xi32> {lm.targets, lm.vocab = 16 : i64})
// CHECK-SAME: -> (tensor<f32>, tensor<16x8xf32>, tensor<3xf32>, tensor<?x4x8xf32>)
// CHECK: %[[LOSS:.*]] = moe.cross_entropy %{{.*}}, %[[TG]]
// The embedding table is used twice (embed and tied output): its adjoints
// add; the embedding's is moe.embed_grad over the flattened tokens.
// CHECK: moe.embed_grad %{{.*}}, %{{.*}} : tensor<?xi32>, tensor<?x8xf32> -> tensor<16x8xf32>
// CHECK: %[[SUM:.*]] = arith.addf %{{.*}}, %{{.*}} : tensor<16x8xf32>
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<3xf32>)
// CHECK: return %[[LOSS]], %[[SUM]], %[[ZERO]], %{{.*}} : tensor<f32>, tensor<16x8xf32>, tensor<3xf32>, tensor<?x4x8xf32>
func.func @m(%t: tensor<?x4xi32>, %e: tensor<16x8xf32> {lm.param = "embed.weight"}, %u: tensor<3xf32> {lm.param = "unused"}) -> (tensor<?x4x16xf32>, tensor<?x4x8xf32>) {
  %x = moe.embed %e, %t : tensor<16x8xf32>, tensor<?x4xi32> -> tensor<?x4x8xf32>
  %f = tensor.collapse_shape %x [[0, 1], [2]] : tensor<?x4x8xf32> into tensor<?x8xf32>
  %y = moe.linear %f, %e : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %c0 = arith.constant 0 : index
  %b = tensor.dim %x, %c0 : tensor<?x4x8xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [%b, 4, 16] : tensor<?x16xf32> into tensor<?x4x16xf32>
  return %l, %x : tensor<?x4x16xf32>, tensor<?x4x8xf32>
}

// RUN: switchyard-opt %s -lm-materialize-params -lm-outline-layers -lm-decompose-layers -convert-lm-to-func -lm-differentiate | FileCheck %s
// RUN: switchyard-opt %s -lm-materialize-params -lm-outline-layers -lm-decompose-layers -convert-lm-to-func -lm-differentiate -cse -lm-split-block-gradients | FileCheck %s --check-prefix=SPLIT
// RUN: switchyard-opt %s -lm-materialize-params -lm-outline-layers -lm-decompose-layers -convert-lm-to-func -lm-differentiate -lm-build-train-step | FileCheck %s --check-prefix=STEP

// A model whose blocks are functions (lm-outline-layers): each block
// function is differentiated once. Its training forward function draws
// its dropout masks from a seed argument plus an offset argument, streams
// 0, 1, ... in program order; each call passes the step's seed and the
// number of masks drawn before it, so that every mask keeps the stream it
// has with the layers inline. The vector-Jacobian product recomputes the
// forward pass, then returns the block's result and the adjoints of its
// active arguments.
// CHECK-LABEL: func.func private @m__ffn_train(
// CHECK-SAME: %[[SEED:[a-z0-9]+]]: tensor<i64>, %[[OFFSET:[a-z0-9]+]]: i64) -> tensor<?x4x16xf32>
// CHECK-SAME: lm.generated
// CHECK: %[[S:.*]] = tensor.extract %[[SEED]][] : tensor<i64>
// CHECK: %[[SUM:.*]] = arith.addi %[[S]], %[[OFFSET]] : i64
// CHECK: %[[MASKSEED:.*]] = tensor.from_elements %[[SUM]] : tensor<i64>
// CHECK: moe.dropout_mask %{{.*}} seed(%[[MASKSEED]]) {rate = 1.000000e-01 : f64}
// CHECK-LABEL: func.func private @m__ffn_vjp(
// CHECK-SAME: tensor<i64>, %{{.*}}: i64, %{{.*}}: tensor<?x4x16xf32>) -> (tensor<?x4x16xf32>, tensor<?x4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<32x16xf32>, tensor<16x32xf32>)
// CHECK-SAME: lm.vjp = {forward = @m__ffn_train, inputs = 7 : i64, results = 1 : i64}
// The inference function keeps its unseeded masks.
// CHECK-LABEL: func.func private @m__ffn(
// CHECK: moe.dropout_mask %{{.*}} {rate = 1.000000e-01 : f64} : tensor<?x4x16xf32> -> tensor<?x4x16xi1>
// CHECK-LABEL: func.func @m_grad(
// CHECK-SAME: %[[SEEDARG:[a-z0-9]+]]: tensor<i64> {lm.seed})
// CHECK: %[[C0:.*]] = arith.constant 0 : i64
// CHECK: %[[X1:.*]] = call @m__ffn_train(%[[X0:[a-z0-9]+]], {{.*}}, %[[SEEDARG]], %[[C0]])
// CHECK: %[[C1:.*]] = arith.constant 1 : i64
// CHECK: call @m__ffn_train(%[[X1]], {{.*}}, %[[SEEDARG]], %[[C1]])
// The reverse sweep: the last block's product first, its input's adjoint
// into the one before.
// CHECK: %[[D1:.*]]:6 = call @m__ffn_vjp(%[[X1]], {{.*}}, %[[SEEDARG]], %[[C1]], %{{.*}})
// CHECK: call @m__ffn_vjp(%[[X0]], {{.*}}, %[[SEEDARG]], %[[C0]], %[[D1]]#1)

// After the split, the training forward function returns its result and
// the residuals (the dropout mask, the hidden layer before and after the
// ReLU, the normalised input); the backward function takes the block's
// inputs, the forward call's results, then the adjoint of its result, and
// returns the adjoints. Each backward call reads its layer's forward call.
// SPLIT-LABEL: func.func private @m__ffn_train(
// SPLIT-SAME: -> (tensor<?x4x16xf32>, tensor<?x4x16xi1>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x4x16xf32>)
// SPLIT-LABEL: func.func private @m__ffn_bwd(
// SPLIT-SAME: tensor<i64>, %{{.*}}: i64, %{{.*}}: tensor<?x4x16xf32>, %{{.*}}: tensor<?x4x16xi1>, %{{.*}}: tensor<?x32xf32>, %{{.*}}: tensor<?x32xf32>, %{{.*}}: tensor<?x4x16xf32>, %{{.*}}: tensor<?x4x16xf32>)
// SPLIT-SAME: -> (tensor<?x4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<32x16xf32>, tensor<16x32xf32>)
// The dropout gradient applies the mask it receives.
// SPLIT-NOT: moe.dropout_mask
// SPLIT: linalg.generic {{.*}} ins(%arg12, %arg8 : tensor<?x4x16xf32>, tensor<?x4x16xi1>)
// SPLIT-LABEL: func.func @m_grad(
// SPLIT: %[[F0:.*]]:5 = call @m__ffn_train(
// SPLIT: %[[F1:.*]]:5 = call @m__ffn_train(%[[F0]]#0,
// SPLIT: %[[B1:.*]]:5 = call @m__ffn_bwd(%[[F0]]#0, {{.*}}, %[[F1]]#0, %[[F1]]#1, %[[F1]]#2, %[[F1]]#3, %[[F1]]#4, %{{.*}})
// SPLIT: call @m__ffn_bwd({{.*}}, %[[F0]]#0, %[[F0]]#1, %[[F0]]#2, %[[F0]]#3, %[[F0]]#4, %[[B1]]#0)
// SPLIT-NOT: _vjp

// The training step calls the gradient function, then
// updates each layer's parameters with its block's optimizer functions:
// each gradient's sum of squares, added in parameter order; then AdamW
// with the clipping factor. The embedding and output stay in the step.
// STEP-LABEL: func.func private @m__ffn_sum_squares(
// STEP-SAME: (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
// STEP-LABEL: func.func private @m__ffn_adamw(
// STEP-SAME: %{{.*}}: tensor<8xf32>, %{{.*}}: tensor<f32>,
// STEP-COUNT-4: linalg.generic
// STEP-LABEL: func.func @m_train_step(
// STEP: %[[G:.*]]:11 = call @m_grad(
// STEP: %[[S0:.*]]:4 = call @m__ffn_sum_squares(%[[G]]#2, %[[G]]#3, %[[G]]#4, %[[G]]#5)
// STEP: %[[S1:.*]]:4 = call @m__ffn_sum_squares(%[[G]]#6, %[[G]]#7, %[[G]]#8, %[[G]]#9)
// STEP: tensor.extract %[[S0]]#0
// STEP: tensor.extract %[[S0]]#3
// STEP: tensor.extract %[[S1]]#0
// STEP: math.sqrt
// STEP: call @m__ffn_adamw(%{{.*}}, %{{.*}}, %arg2, %arg3, %arg4, %arg5, %[[G]]#2,
// STEP: call @m__ffn_adamw(%{{.*}}, %{{.*}}, %arg6, %arg7, %arg8, %arg9, %[[G]]#6,
lm.model @m(%t: tensor<?x4xi32>) -> tensor<?x4x64xf32> {
  %x0 = lm.embed "embed" %t {vocab = 64} : tensor<?x4xi32> -> tensor<?x4x16xf32>
  %x1 = lm.ffn "layers.0.ffn" %x0 {d_ff = 32, dropout = 0.1} : tensor<?x4x16xf32>
  %x2 = lm.ffn "layers.1.ffn" %x1 {d_ff = 32, dropout = 0.1} : tensor<?x4x16xf32>
  %l = lm.output "out" %x2 {vocab = 64} : tensor<?x4x16xf32> -> tensor<?x4x64xf32>
  lm.return %l : tensor<?x4x64xf32>
}

// RUN: switchyard-opt %s --canonicalize --split-input-file | FileCheck %s

// An unseeded mask stays: lm-differentiate seeds it in a gradient function,
// so it is the identity only once lowered.
// CHECK-LABEL: func.func @dropout_inference_mask
// CHECK: %[[M:.*]] = moe.dropout_mask
// CHECK: moe.dropout %{{.*}}, %[[M]]
func.func @dropout_inference_mask(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %m = moe.dropout_mask %x {rate = 0.1 : f64} : tensor<?x8xf32> -> tensor<?x8xi1>
  %y = moe.dropout %x, %m {rate = 0.1 : f64} : tensor<?x8xf32>, tensor<?x8xi1>
  return %y : tensor<?x8xf32>
}

// -----

// Rate 0 keeps every element and scales by 1, whatever the seed.
// CHECK-LABEL: func.func @dropout_rate_zero
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %{{.*}}: tensor<i64>)
// CHECK-NOT: moe.dropout
// CHECK: return %[[X]]
func.func @dropout_rate_zero(%x: tensor<?x8xf32>, %s: tensor<i64>) -> tensor<?x8xf32> {
  %m = moe.dropout_mask %x seed(%s) {rate = 0.0 : f64} : tensor<?x8xf32>, tensor<i64> -> tensor<?x8xi1>
  %y = moe.dropout %x, %m {rate = 0.0 : f64} : tensor<?x8xf32>, tensor<?x8xi1>
  return %y : tensor<?x8xf32>
}

// -----

// A seeded mask of a positive rate drops elements: the op stays.
// CHECK-LABEL: func.func @dropout_training_stays
// CHECK: %[[M:.*]] = moe.dropout_mask
// CHECK: %[[Y:.*]] = moe.dropout %{{.*}}, %[[M]] {rate = 1.000000e-01 : f64}
// CHECK: return %[[Y]]
func.func @dropout_training_stays(%x: tensor<?x8xf32>, %s: tensor<i64>) -> tensor<?x8xf32> {
  %m = moe.dropout_mask %x seed(%s) {rate = 0.1 : f64} : tensor<?x8xf32>, tensor<i64> -> tensor<?x8xi1>
  %y = moe.dropout %x, %m {rate = 0.1 : f64} : tensor<?x8xf32>, tensor<?x8xi1>
  return %y : tensor<?x8xf32>
}

// -----

// A mask that is not a moe.dropout_mask is kept at a positive rate.
// CHECK-LABEL: func.func @dropout_argument_mask_stays
// CHECK: moe.dropout
func.func @dropout_argument_mask_stays(%x: tensor<4x8xf32>, %m: tensor<4x8xi1>) -> tensor<4x8xf32> {
  %y = moe.dropout %x, %m {rate = 0.5 : f64} : tensor<4x8xf32>, tensor<4x8xi1>
  return %y : tensor<4x8xf32>
}

// -----

// An auxiliary loss of weight 0 adds nothing; its input passes through and
// the loss's computation is dead.
// CHECK-LABEL: func.func @add_loss_weight_zero
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %{{.*}}: tensor<?x4xf32>)
// CHECK-NOT: moe.add_loss
// CHECK-NOT: moe.routing_entropy
// CHECK: return %[[X]]
func.func @add_loss_weight_zero(%x: tensor<?x8xf32>, %z: tensor<?x4xf32>) -> tensor<?x8xf32> {
  %h = moe.routing_entropy %z : tensor<?x4xf32> -> tensor<f32>
  %y = moe.add_loss %x, %h {weight = 0.0 : f64} : tensor<?x8xf32>, tensor<f32>
  return %y : tensor<?x8xf32>
}

// -----

// A non-zero weight keeps the op for differentiation.
// CHECK-LABEL: func.func @add_loss_weighted_stays
// CHECK: moe.add_loss %{{.*}}, %{{.*}} {weight = -1.000000e-03 : f64}
func.func @add_loss_weighted_stays(%x: tensor<?x8xf32>, %h: tensor<f32>) -> tensor<?x8xf32> {
  %y = moe.add_loss %x, %h {weight = -1.0e-3 : f64} : tensor<?x8xf32>, tensor<f32>
  return %y : tensor<?x8xf32>
}

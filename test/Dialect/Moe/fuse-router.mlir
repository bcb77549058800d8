// RUN: switchyard-opt %s --moe-fuse-router | FileCheck %s
// RUN: switchyard-opt %s --moe-fuse-router | switchyard-opt | FileCheck %s

// Gate and top-k become one moe.fused_router; the gate disappears.
// CHECK-LABEL: func.func @route
// CHECK-SAME: (%[[X:.*]]: tensor<?x16xf32>, %[[W:.*]]: tensor<10x16xf32>)
// CHECK: %[[V:.*]], %[[I:.*]], %{{.*}} = moe.fused_router %[[X]], %[[W]] k(3) : tensor<?x16xf32>, tensor<10x16xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
// CHECK-NOT: moe.gate
// CHECK-NOT: moe.topk
// CHECK: return %[[V]], %[[I]]
func.func @route(%x: tensor<?x16xf32>, %w: tensor<10x16xf32>) -> (tensor<?x2x3xf32>, tensor<?x2x3xi32>) {
  %s = moe.gate %x, %w : tensor<?x16xf32>, tensor<10x16xf32> -> tensor<?x2x5xf32>
  %v, %i = moe.topk %s k(3) : tensor<?x2x5xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>
  return %v, %i : tensor<?x2x3xf32>, tensor<?x2x3xi32>
}

// Expert dropout: the mask moves to the fused op; the mask was drawn "like"
// the scores and now reads the shape from an empty tensor; a later user of
// the scores (here returned, in a gradient function the gate's gradient)
// reads the fused op's scores.
// CHECK-LABEL: func.func @masked
// CHECK-SAME: (%[[X:.*]]: tensor<?x16xf32>, %[[W:.*]]: tensor<8x16xf32>, %[[SEED:.*]]: tensor<i64>)
// CHECK: %[[LIKE:.*]] = tensor.empty(%{{.*}}) : tensor<?x8xf32>
// CHECK: %[[M:.*]] = moe.dropout_mask %[[LIKE]] seed(%[[SEED]])
// CHECK: %[[V:.*]], %[[I:.*]], %[[S:.*]] = moe.fused_router %[[X]], %[[W]] k(2) mask(%[[M]]) : tensor<?x16xf32>, tensor<8x16xf32>, tensor<?x8xi1> -> tensor<?x2xf32>, tensor<?x2xi64>, tensor<?x8xf32>
// CHECK-NOT: moe.gate
// CHECK: return %[[V]], %[[I]], %[[S]]
func.func @masked(%x: tensor<?x16xf32>, %w: tensor<8x16xf32>, %seed: tensor<i64>) -> (tensor<?x2xf32>, tensor<?x2xi64>, tensor<?x8xf32>) {
  %s = moe.gate %x, %w : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %m = moe.dropout_mask %s seed(%seed) {rate = 0.25 : f64} : tensor<?x8xf32>, tensor<i64> -> tensor<?x8xi1>
  %v, %i = moe.topk %s k(2) mask(%m) : tensor<?x8xf32>, tensor<?x8xi1> -> tensor<?x2xf32>, tensor<?x2xi64>
  return %v, %i, %s : tensor<?x2xf32>, tensor<?x2xi64>, tensor<?x8xf32>
}

// A top-k of scores that do not come from a gate stays.
// CHECK-LABEL: func.func @not_a_gate
// CHECK: moe.topk
// CHECK-NOT: moe.fused_router
func.func @not_a_gate(%s: tensor<?x5xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>) {
  %v, %i = moe.topk %s k(2) : tensor<?x5xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
  return %v, %i : tensor<?x2xf32>, tensor<?x2xi32>
}

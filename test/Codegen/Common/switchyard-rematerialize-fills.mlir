// RUN: switchyard-opt %s --switchyard-rematerialize-fills | FileCheck %s

#v = affine_map<(d0) -> (d0)>
#s = affine_map<(d0) -> ()>

// Two reductions start from the same zeros: the second gets a fill (and a
// tensor.empty) of its own, right before it; the first keeps the original.
// CHECK-LABEL: func.func @sums
// CHECK: %[[E:.*]] = tensor.empty() : tensor<f32>
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%arg0 : tensor<8xf32>) outs(%[[Z]] : tensor<f32>)
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<f32>
// CHECK: %[[Z1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]] : tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%arg1 : tensor<8xf32>) outs(%[[Z1]] : tensor<f32>)
// The fill read as an input is not an initial value: it stays shared.
// CHECK: linalg.generic {{.*}} ins(%[[Z]] : tensor<f32>)
func.func @sums(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %a = linalg.generic {indexing_maps = [#v, #s], iterator_types = ["reduction"]} ins(%x : tensor<8xf32>) outs(%z : tensor<f32>) {
  ^bb0(%p: f32, %o: f32):
    %t = arith.addf %p, %o : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  %b = linalg.generic {indexing_maps = [#v, #s], iterator_types = ["reduction"]} ins(%y : tensor<8xf32>) outs(%z : tensor<f32>) {
  ^bb0(%p: f32, %o: f32):
    %t = arith.maximumf %p, %o : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  %e2 = tensor.empty() : tensor<f32>
  %c = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%z : tensor<f32>) outs(%e2 : tensor<f32>) {
  ^bb0(%p: f32, %o: f32):
    %t = arith.negf %p : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  return %a, %b, %c : tensor<f32>, tensor<f32>, tensor<f32>
}

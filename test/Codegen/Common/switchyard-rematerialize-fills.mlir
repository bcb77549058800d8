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

// Two row loops (switchyard-fuse-rows) write into the same empty tensor,
// twice in the second: each loop but the first, and each of its shared
// outputs, gets an empty tensor of its own, so that bufferization gives
// them separate buffers. An empty tensor that ops only read stays.
// CHECK-LABEL: func.func @row_loops
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: scf.forall (%{{.*}}) in (4) shared_outs(%{{.*}} = %[[E]])
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: scf.forall (%{{.*}}) in (4) shared_outs(%{{.*}} = %[[E1]], %{{.*}} = %[[E2]])
// CHECK: %[[G:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[G]], %[[G]] : tensor<4xf32>, tensor<4xf32>)
func.func @row_loops(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %a = scf.forall (%i) in (4) shared_outs(%o = %e) -> (tensor<4xf32>) {
    %r = tensor.extract_slice %x[%i, 0] [1, 1] [1, 1] : tensor<4x8xf32> to tensor<1xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %r into %o[%i] [1] [1] : tensor<1xf32> into tensor<4xf32>
    }
  }
  %b:2 = scf.forall (%i) in (4) shared_outs(%o = %e, %p = %e) -> (tensor<4xf32>, tensor<4xf32>) {
    %r = tensor.extract_slice %x[%i, 1] [1, 1] [1, 1] : tensor<4x8xf32> to tensor<1xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %r into %o[%i] [1] [1] : tensor<1xf32> into tensor<4xf32>
      tensor.parallel_insert_slice %r into %p[%i] [1] [1] : tensor<1xf32> into tensor<4xf32>
    }
  }
  %g = tensor.empty() : tensor<4xf32>
  %f = tensor.empty() : tensor<4xf32>
  %c = linalg.generic {indexing_maps = [#v, #v, #v], iterator_types = ["parallel"]} ins(%g, %g : tensor<4xf32>, tensor<4xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %t = arith.addf %p, %q : f32
    linalg.yield %t : f32
  } -> tensor<4xf32>
  return %a, %b#0, %b#1, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

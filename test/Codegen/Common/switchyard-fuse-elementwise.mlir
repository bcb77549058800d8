// RUN: switchyard-opt %s --switchyard-fuse-elementwise --split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A chain of elementwise ops becomes one op.
// CHECK-LABEL: func.func @chain
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK-NEXT: math.exp
// CHECK-NOT: linalg.generic
func.func @chain(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = math.exp %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A producer whose result is also read after the consumer (here returned)
// is merged: the fused op yields its elements too.
// CHECK-LABEL: func.func @merged
// CHECK: %[[F:.*]]:2 = linalg.generic
// CHECK: %[[S:.*]] = arith.addf
// CHECK: %[[E:.*]] = math.exp %[[S]]
// CHECK: linalg.yield %[[S]], %[[E]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[F]]#1, %[[F]]#0
func.func @merged(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = math.exp %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %b, %a : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A producer also read by an op before the consumer stays as it is: fusing
// would compute it twice.
// CHECK-LABEL: func.func @read_before
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg0, %arg1
// CHECK: arith.addf
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic
// CHECK: math.exp
func.func @read_before(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %r: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%a : tensor<4x8xf32>) outs(%r : tensor<4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = math.exp %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %b, %sum : tensor<4x8xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#vec = affine_map<(d0) -> (d0)>

// A cheap producer that larger iteration spaces broadcast (a row's mean)
// is computed again by each of its consumers; one of more than four
// operations (a row's root mean square) stays an op of its own.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME: %[[SUM:[a-z0-9]+]]: tensor<4xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[SUM]] : tensor<4xf32>)
// CHECK: math.sqrt
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg0, %[[SUM]], %{{.*}} : tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: arith.divf
// CHECK: arith.subf
// CHECK: arith.divf
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg0, %[[SUM]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK: arith.divf
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
func.func @broadcast(%x: tensor<4x8xf32>, %sum: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c8 = arith.constant 8.0 : f32
  %e1 = tensor.empty() : tensor<4xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %mean = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]} ins(%sum : tensor<4xf32>) outs(%e1 : tensor<4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.divf %p, %c8 : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %root = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]} ins(%sum : tensor<4xf32>) outs(%e1 : tensor<4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %q = arith.divf %p, %c8 : f32
    %r = arith.addf %q, %c8 : f32
    %t = arith.mulf %r, %r : f32
    %u = arith.subf %t, %q : f32
    %s = math.sqrt %u : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %a = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %mean, %root : tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %m: f32, %r: f32, %o: f32):
    %s = arith.subf %p, %m : f32
    %t = arith.divf %s, %r : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %mean : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %m: f32, %o: f32):
    %s = arith.mulf %p, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// Matmul-like consumers keep their factors plain, for the CPU's register
// tiles and the GPU's tensor cores; a gather stays an op of its own.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-4: linalg.generic
func.func @kept(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %i: tensor<4x8xindex>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %s = arith.maximumf %p, %z : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %mm = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%relu, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%x : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%i : tensor<4x8xindex>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%j: index, %o: f32):
    %r = linalg.index 0 : index
    %v = tensor.extract %x[%r, %j] : tensor<4x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%g : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %s = arith.negf %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %mm, %n : tensor<4x8xf32>, tensor<4x8xf32>
}

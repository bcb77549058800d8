// RUN: switchyard-opt %s --switchyard-fuse-rows --split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// A layer norm's sum, sum of squares and normalisation: one loop over the
// rows, each op on one row, the fills made per row; the sum of squares is
// also a result of the function.
// CHECK-LABEL: func.func @norm
// CHECK: %[[R:.*]]:3 = scf.forall (%[[I:.*]]) in (%{{.*}}) shared_outs(%[[S:.*]] = %{{.*}}, %[[Q:.*]] = %{{.*}}, %[[O:.*]] = %{{.*}})
// CHECK: %[[X:.*]] = tensor.extract_slice %{{.*}}[%[[I]], 0] [1, 8] [1, 1] : tensor<?x8xf32> to tensor<8xf32>
// CHECK: %[[SI:.*]] = tensor.extract_slice %[[S]][%[[I]]] [1] [1] : tensor<?xf32> to tensor<f32>
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[SI]] : tensor<f32>)
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[X]] : tensor<8xf32>) outs(%[[Z]] : tensor<f32>)
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%{{.*}}, %[[SUM]] : tensor<8xf32>, tensor<f32>)
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} iterator_types = ["parallel"]} ins(%{{.*}}, %[[SUM]], %[[SQ]], %{{.*}} : tensor<8xf32>, tensor<f32>, tensor<f32>, tensor<8xf32>)
// CHECK: scf.forall.in_parallel
// CHECK-NEXT: tensor.parallel_insert_slice %[[SUM]] into %[[S]][%[[I]]] [1] [1]
// CHECK-NEXT: tensor.parallel_insert_slice %[[SQ]] into %[[Q]][%[[I]]] [1] [1]
// CHECK-NEXT: tensor.parallel_insert_slice %[[Y]] into %[[O]][%[[I]], 0] [1, 8] [1, 1]
// CHECK: } {mapping = [#gpu.block<linear_dim_0>]}
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]#2, %[[R]]#1
func.func @norm(%x: tensor<?x8xf32>, %g: tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n8 = arith.constant 8.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x8xf32>) outs(%z : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %sum : tensor<?x8xf32>, tensor<?xf32>) outs(%z : tensor<?xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %mean = arith.divf %m, %n8 : f32
    %d = arith.subf %a, %mean : f32
    %d2 = arith.mulf %d, %d : f32
    %s = arith.addf %o, %d2 : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %e2 = tensor.empty(%n) : tensor<?x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum, %sq, %g : tensor<?x8xf32>, tensor<?xf32>, tensor<?xf32>, tensor<8xf32>) outs(%e2 : tensor<?x8xf32>) {
  ^bb0(%a: f32, %m: f32, %v: f32, %gg: f32, %o: f32):
    %mean = arith.divf %m, %n8 : f32
    %d = arith.subf %a, %mean : f32
    %var = arith.divf %v, %n8 : f32
    %r = math.rsqrt %var : f32
    %t = arith.mulf %d, %r : f32
    %u = arith.mulf %t, %gg : f32
    linalg.yield %u : f32
  } -> tensor<?x8xf32>
  return %y, %sq : tensor<?x8xf32>, tensor<?xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#t = affine_map<(d0, d1) -> (d1)>

// An op outside the group that reads a row sum ends the group: the loop
// holds the sum alone, before that op. An op that reads the sum through a
// map that does not start with the rows (the sum of row j read in column
// j) does not join either.
// CHECK-LABEL: func.func @ended
// CHECK: %[[R:.*]] = scf.forall
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]
// CHECK: } {mapping = [#gpu.block<linear_dim_0>]}
// CHECK: tensor.extract %[[R]]
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[R]] :
func.func @ended(%x: tensor<4x4xf32>, %k: index) -> (f32, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x4xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %first = tensor.extract %sum[%k] : tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %y = linalg.generic {indexing_maps = [#id, #t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<4x4xf32>, tensor<4xf32>) outs(%e2 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %d = arith.divf %a, %s : f32
    linalg.yield %d : f32
  } -> tensor<4x4xf32>
  return %first, %y : f32, tensor<4x4xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d1, d2)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// Matmul-like reductions stay out: the targets' matmul kernels take them.
// CHECK-LABEL: func.func @matmul
// CHECK-NOT: scf.forall
// CHECK: linalg.generic
func.func @matmul(%x: tensor<4x8xf32>, %w: tensor<6x8xf32>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z : tensor<4x6xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// An op with two results (as the elementwise fusion leaves a producer's
// result beside its consumer's) joins with both: a shared output and a
// result of the loop each.
// CHECK-LABEL: func.func @two_results
// CHECK: %[[R:.*]]:3 = scf.forall
// CHECK: %[[Y:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel"]} {{.*}} outs(%{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>)
// CHECK: tensor.parallel_insert_slice %[[Y]]#0
// CHECK: tensor.parallel_insert_slice %[[Y]]#1
// CHECK: return %[[R]]#1, %[[R]]#2
func.func @two_results(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %y:2 = linalg.generic {indexing_maps = [#id, #row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<4x8xf32>, tensor<4xf32>) outs(%e2, %e2 : tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32, %p: f32):
    %d = arith.divf %a, %s : f32
    %m = arith.mulf %a, %s : f32
    linalg.yield %d, %m : f32, f32
  } -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %y#0, %y#1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#v = affine_map<(d0) -> (d0)>
#s = affine_map<(d0) -> ()>
#m = affine_map<(d0, d1) -> (d0, d1)>
#ms = affine_map<(d0, d1) -> ()>

// Small reductions to one value (sums of squares of 412 and 8 x 512
// elements) are a group without rows: a loop of one iteration, each op
// whole. One above 8192 elements (its split reduction spreads it over many
// blocks) stays out.
// CHECK-LABEL: func.func @sums_of_squares
// CHECK: %[[R:.*]]:2 = scf.forall (%{{.*}}) in (1) shared_outs
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%{{.*}} : tensor<412xf32>)
// CHECK: linalg.fill
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%{{.*}} : tensor<8x512xf32>)
// CHECK: } {mapping = [#gpu.block<linear_dim_0>]}
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<9x1024xf32>)
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @sums_of_squares(%a: tensor<412xf32>, %b: tensor<8x512xf32>, %c: tensor<9x1024xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %sa = linalg.generic {indexing_maps = [#v, #s], iterator_types = ["reduction"]}
      ins(%a : tensor<412xf32>) outs(%z : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %q = arith.mulf %x, %x : f32
    %t = arith.addf %o, %q : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  %sb = linalg.generic {indexing_maps = [#m, #ms], iterator_types = ["reduction", "reduction"]}
      ins(%b : tensor<8x512xf32>) outs(%z : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %q = arith.mulf %x, %x : f32
    %t = arith.addf %o, %q : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  %sc = linalg.generic {indexing_maps = [#m, #ms], iterator_types = ["reduction", "reduction"]}
      ins(%c : tensor<9x1024xf32>) outs(%z : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %q = arith.mulf %x, %x : f32
    %t = arith.addf %o, %q : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  return %sa, %sb, %sc : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// The last op writes into %dy (a function argument) without reading it,
// and writes every element: the loop's result starts from a fresh tensor,
// not from %dy, which bufferization would copy first. The sum reads its
// init: it keeps it.
// CHECK-LABEL: func.func @overwritten
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %[[DY:.*]]: tensor<?x8xf32>, %[[ACC:.*]]: tensor<?xf32>)
// CHECK: %[[FRESH:.*]] = tensor.empty(%{{.*}}) : tensor<?x8xf32>
// CHECK: scf.forall (%{{.*}}) in (%{{.*}}) shared_outs(%{{.*}} = %[[ACC]], %{{.*}} = %[[FRESH]])
func.func @overwritten(%x: tensor<?x8xf32>, %dy: tensor<?x8xf32>, %acc: tensor<?xf32>) -> tensor<?x8xf32> {
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x8xf32>) outs(%acc : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum, %dy : tensor<?x8xf32>, tensor<?xf32>, tensor<?x8xf32>) outs(%dy : tensor<?x8xf32>) {
  ^bb0(%a: f32, %m: f32, %d: f32, %o: f32):
    %t = arith.mulf %a, %m : f32
    %u = arith.addf %t, %d : f32
    linalg.yield %u : f32
  } -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

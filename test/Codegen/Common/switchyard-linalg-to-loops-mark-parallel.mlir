// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-linalg-to-loops{mark-parallel=1}))" | FileCheck %s
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-linalg-to-loops))" | FileCheck %s --check-prefix=OFF

// mark-parallel marks the outermost scf.for `switchyard.parallel` where its
// iterations are independent: a parallel dimension, and a body that writes
// no memory.

// Rows summed: the rows are independent (the reduction runs inside each).
// CHECK-LABEL: func.func @row_sums
// CHECK: scf.for
// CHECK: scf.for
// CHECK: memref.store
// CHECK: } {switchyard.parallel}
// OFF-LABEL: func.func @row_sums
// OFF-NOT: switchyard.parallel
func.func @row_sums(%x: memref<?x8xf32>, %y: memref<?xf32>) {
  linalg.generic {
      indexing_maps = [affine_map<(r, k) -> (r, k)>, affine_map<(r, k) -> (r)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x8xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// Columns summed with the reduction outermost: each iteration adds to every
// output element, so none is marked.
// CHECK-LABEL: func.func @column_sums
// CHECK-NOT: switchyard.parallel
// CHECK: return
func.func @column_sums(%x: memref<8x?xf32>, %y: memref<?xf32>) {
  linalg.generic {
      indexing_maps = [affine_map<(k, c) -> (k, c)>, affine_map<(k, c) -> (c)>],
      iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<8x?xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// A scatter: the body stores into another buffer at an index it reads, so
// two rows may write one element; not marked.
// CHECK-LABEL: func.func @scatter_rows
// CHECK-NOT: switchyard.parallel
// CHECK: return
func.func @scatter_rows(%index: memref<?xindex>, %to: memref<?xf32>, %out: memref<?xf32>) {
  linalg.generic {
      indexing_maps = [affine_map<(r) -> (r)>, affine_map<(r) -> (r)>],
      iterator_types = ["parallel"]}
      ins(%index : memref<?xindex>) outs(%out : memref<?xf32>) {
  ^bb0(%i: index, %o: f32):
    %one = arith.constant 1.0 : f32
    memref.store %one, %to[%i] : memref<?xf32>
    linalg.yield %o : f32
  }
  return
}

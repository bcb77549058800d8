// RUN: switchyard-opt %s --split-input-file --switchyard-mark-epilogues | FileCheck %s

#x = affine_map<(m, n, k) -> (m, k)>
#wt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (n)>

// The bias and ReLU after a matmul: the allocation of its output moves
// before the matmul's zero fill, the consumer is marked.
// CHECK-LABEL: func.func @bias_relu(
// CHECK-SAME: %[[X:[^:]*]]: memref<?x16xf32>, %[[W:[^:]*]]: memref<8x16xf32>, %[[B:[^:]*]]: memref<8xf32>
// CHECK: %[[C:.*]] = memref.alloc
// CHECK-NEXT: %[[H:.*]] = memref.alloc
// CHECK-NEXT: linalg.fill {{.*}} outs(%[[C]]
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[X]], %[[W]] : {{.*}}) outs(%[[C]]
// CHECK: linalg.generic {{.*}} ins(%[[C]], %[[B]] : {{.*}}) outs(%[[H]] : {{.*}}) attrs = {switchyard.epilogue}
func.func @bias_relu(%x: memref<?x16xf32>, %w: memref<8x16xf32>, %b: memref<8xf32>, %n: index) -> memref<?x8xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc(%n) : memref<?x8xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x8xf32>)
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x16xf32>, memref<8x16xf32>) outs(%c : memref<?x8xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %m = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %h = memref.alloc(%n) : memref<?x8xf32>
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %b : memref<?x8xf32>, memref<8xf32>) outs(%h : memref<?x8xf32>) {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %s = arith.addf %v, %bias : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  }
  memref.dealloc %c : memref<?x8xf32>
  return %h : memref<?x8xf32>
}

// -----

#x = affine_map<(m, n, k) -> (m, k)>
#wt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
#id3 = affine_map<(b, s, n) -> (b, s, n)>

// A consumer over [batch, 4, 8] of the [batch * 4, 8] product: its loops
// are collapsed to the product's, its index 0 and 1 recovered from the
// collapsed index, the other operands collapsed alike.
// CHECK-LABEL: func.func @reshaped(
// CHECK-SAME: %[[X:[^:]*]]: memref<?x16xf32>, %[[W:[^:]*]]: memref<8x16xf32>, %[[R:[^:]*]]: memref<?x4x8xf32>
// CHECK: %[[Y:.*]] = memref.alloc(%{{.*}}) : memref<?x4x8xf32>
// CHECK-DAG: %[[RF:.*]] = memref.collapse_shape %[[R]] {{\[\[}}0, 1], [2]]
// CHECK-DAG: %[[YF:.*]] = memref.collapse_shape %[[Y]] {{\[\[}}0, 1], [2]]
// CHECK: linalg.fill
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[C:[^ ]*]] :
// CHECK-NEXT: ^bb
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel"]} ins(%[[C]], %[[RF]] : memref<?x8xf32>, memref<?x8xf32>) outs(%[[YF]] : memref<?x8xf32>) attrs = {switchyard.epilogue}
// CHECK: %[[I:.*]] = linalg.index 0
// CHECK: arith.remsi %[[I]], %{{.*}}
func.func @reshaped(%x: memref<?x16xf32>, %w: memref<8x16xf32>, %r: memref<?x4x8xf32>, %n: index, %b: index) -> memref<?x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc(%n) : memref<?x8xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x8xf32>)
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x16xf32>, memref<8x16xf32>) outs(%c : memref<?x8xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %m = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %c3 = memref.expand_shape %c [[0, 1], [2]] output_shape [%b, 4, 8] : memref<?x8xf32> into memref<?x4x8xf32>
  %y = memref.alloc(%b) : memref<?x4x8xf32>
  linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%c3, %r : memref<?x4x8xf32>, memref<?x4x8xf32>) outs(%y : memref<?x4x8xf32>) {
  ^bb0(%v: f32, %res: f32, %o: f32):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %s = arith.addf %v, %res : f32
    %t = arith.addf %s, %fi : f32
    linalg.yield %t : f32
  }
  return %y : memref<?x4x8xf32>
}

// -----

#x = affine_map<(m, n, k) -> (m, k)>
#w = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#tx = affine_map<(i, o, t) -> (t, i)>
#tdy = affine_map<(i, o, t) -> (t, o)>
#tw = affine_map<(i, o, t) -> (i, o)>
#id = affine_map<(m, n) -> (m, n)>

// The consumer behind a weight gradient that touches none of its buffers
// moves up to the product's matmul.
// CHECK-LABEL: func.func @behind_independent(
// CHECK: linalg.generic {{.*}} outs(%[[DH:[^ ]*]] : memref<?x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[DH]], %{{.*}} : memref<?x8xf32>, memref<?x8xf32>) outs(%{{.*}} : memref<?x8xf32>) attrs = {switchyard.epilogue}
// CHECK: linalg.fill
// CHECK-NEXT: linalg.generic {{.*}} outs(%{{.*}} : memref<8x4xf32>)
func.func @behind_independent(%dy: memref<?x4xf32>, %w: memref<4x8xf32>, %x: memref<?x8xf32>, %pre: memref<?x8xf32>, %n: index) -> (memref<?x8xf32>, memref<8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %dh = memref.alloc(%n) : memref<?x8xf32>
  linalg.fill ins(%zero : f32) outs(%dh : memref<?x8xf32>)
  linalg.generic {indexing_maps = [#x, #w, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy, %w : memref<?x4xf32>, memref<4x8xf32>) outs(%dh : memref<?x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %dw = memref.alloc() : memref<8x4xf32>
  linalg.fill ins(%zero : f32) outs(%dw : memref<8x4xf32>)
  linalg.generic {indexing_maps = [#tx, #tdy, #tw], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<?x8xf32>, memref<?x4xf32>) outs(%dw : memref<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %g = memref.alloc(%n) : memref<?x8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dh, %pre : memref<?x8xf32>, memref<?x8xf32>) outs(%g : memref<?x8xf32>) {
  ^bb0(%v: f32, %p: f32, %o: f32):
    %pos = arith.cmpf ogt, %p, %zero : f32
    %r = arith.select %pos, %v, %zero : f32
    linalg.yield %r : f32
  }
  return %g, %dw : memref<?x8xf32>, memref<8x4xf32>
}

// -----

#x = affine_map<(m, n, k) -> (m, k)>
#wt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#t = affine_map<(m, n) -> (n, m)>

// Not marked: a product that is not the function's own allocation (someone
// else may read it); a consumer that reads the product transposed (an
// element another block computes); an output that is a factor of the
// matmul (written while other blocks read it); an op between that writes
// a buffer the consumer reads.
// CHECK-LABEL: func.func @not_marked(
// CHECK-NOT: switchyard.epilogue
// CHECK: return
func.func @not_marked(%x: memref<8x8xf32>, %w: memref<8x8xf32>, %arg: memref<8x8xf32>, %v: memref<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%arg : memref<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %o1 = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%arg : memref<8x8xf32>) outs(%o1 : memref<8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  }
  %c2 = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c2 : memref<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %o2 = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2 : memref<8x8xf32>) outs(%o2 : memref<8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  %c3 = memref.alloc() : memref<8x8xf32>
  %xs = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%xs, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c3 : memref<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c3 : memref<8x8xf32>) outs(%xs : memref<8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  %c4 = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c4 : memref<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.copy ins(%x : memref<8x8xf32>) outs(%v : memref<8x8xf32>)
  %o4 = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c4, %v : memref<8x8xf32>, memref<8x8xf32>) outs(%o4 : memref<8x8xf32>) {
  ^bb0(%in: f32, %vv: f32, %o: f32):
    %r = arith.addf %in, %vv : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#x = affine_map<(m, n, k) -> (m, k)>
#wt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#t = affine_map<(m, n) -> (n, m)>

// Not marked: buffers that another op picks (here arith.select of the
// product and an argument) may be the product: the copy between must read
// the product before the in-place ReLU, and the transposed read would race
// with other blocks' stores.
// CHECK-LABEL: func.func @picked_alias(
// CHECK-NOT: switchyard.epilogue
// CHECK: return
func.func @picked_alias(%x: memref<8x8xf32>, %w: memref<8x8xf32>, %arg: memref<8x8xf32>, %cond: i1) -> (memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x8xf32>
  %s = arith.select %cond, %c, %arg : memref<8x8xf32>
  %o = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x8xf32>)
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %m = arith.mulf %a, %bb : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  linalg.copy ins(%s : memref<8x8xf32>) outs(%o : memref<8x8xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%v: f32, %out: f32):
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  }
  %c2 = memref.alloc() : memref<8x8xf32>
  %s2 = arith.select %cond, %c2, %arg : memref<8x8xf32>
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c2 : memref<8x8xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %m = arith.mulf %a, %bb : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  %o2 = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#id, #t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2, %s2 : memref<8x8xf32>, memref<8x8xf32>) outs(%o2 : memref<8x8xf32>) {
  ^bb0(%v: f32, %p: f32, %out: f32):
    %r = arith.addf %v, %p : f32
    linalg.yield %r : f32
  }
  return %c, %o, %o2 : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>
}

// -----

#x = affine_map<(m, n, k) -> (m, k)>
#wt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>

// Not marked: an op between the two would move above the fill, but its
// region uses a value defined after the fill.
// CHECK-LABEL: func.func @region_use(
// CHECK-NOT: switchyard.epilogue
// CHECK: return
func.func @region_use(%x: memref<?x16xf32>, %w: memref<8x16xf32>, %n: index, %cond: i1) -> memref<?x8xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc(%n) : memref<?x8xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x8xf32>)
  %n2 = arith.addi %n, %n : index
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x16xf32>, memref<8x16xf32>) outs(%c : memref<?x8xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %m = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %s = scf.if %cond -> f32 {
    %i = arith.index_cast %n2 : index to i32
    %f = arith.sitofp %i : i32 to f32
    scf.yield %f : f32
  } else {
    scf.yield %zero : f32
  }
  %h = memref.alloc(%n) : memref<?x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<?x8xf32>) outs(%h : memref<?x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %s : f32
    linalg.yield %r : f32
  }
  return %h : memref<?x8xf32>
}

// -----

#x = affine_map<(m, n, k) -> (m, k)>
#wt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>

// A scalar read between the two (a dropout seed) moves above the matmul
// with the allocations; a read of a buffer that an op between writes does
// not, and that consumer stays unmarked.
// CHECK-LABEL: func.func @seed_read(
// CHECK-SAME: %[[SEED:[^:]*]]: memref<f32>, %[[V:[^:]*]]: memref<f32>
// CHECK: memref.load %[[SEED]][]
// CHECK: linalg.fill
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[C:[^ ]*]] :
// CHECK: linalg.generic {{.*}} ins(%[[C]] : {{.*}}) attrs = {switchyard.epilogue}
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[V]] : memref<f32>)
// CHECK: memref.load %[[V]][]
// CHECK-NOT: switchyard.epilogue
// CHECK: return
func.func @seed_read(%x: memref<8x8xf32>, %w: memref<8x8xf32>, %seed: memref<f32>, %v: memref<f32>) -> (memref<8x8xf32>, memref<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x8xf32>)
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  %s = memref.load %seed[] : memref<f32>
  %h = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x8xf32>) outs(%h : memref<8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = arith.mulf %in, %s : f32
    linalg.yield %r : f32
  }
  %c2 = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c2 : memref<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%v : memref<f32>)
  %t = memref.load %v[] : memref<f32>
  %h2 = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c2 : memref<8x8xf32>) outs(%h2 : memref<8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = arith.mulf %in, %t : f32
    linalg.yield %r : f32
  }
  return %h, %h2 : memref<8x8xf32>, memref<8x8xf32>
}

// -----

#x = affine_map<(m, n, k) -> (m, k)>
#wt = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>

// Not marked: a contraction inside a loop (a row group's) is part of the
// loop's kernel, not a tensor-core kernel of its own.
// CHECK-LABEL: func.func @nested(
// CHECK-NOT: switchyard.epilogue
// CHECK: return
func.func @nested(%x: memref<8x8xf32>, %w: memref<8x8xf32>, %n: index) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %c = memref.alloc() : memref<8x8xf32>
    linalg.fill ins(%zero : f32) outs(%c : memref<8x8xf32>)
    linalg.generic {indexing_maps = [#x, #wt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    }
    %h = memref.alloc() : memref<8x8xf32>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%c : memref<8x8xf32>) outs(%h : memref<8x8xf32>) {
    ^bb0(%in: f32, %o: f32):
      %r = arith.maximumf %in, %zero : f32
      linalg.yield %r : f32
    }
  }
  return
}

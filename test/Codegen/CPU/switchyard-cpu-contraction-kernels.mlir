// RUN: switchyard-opt %s --switchyard-cpu-contraction-kernels --split-input-file | FileCheck %s
// RUN: switchyard-opt %s --switchyard-cpu-contraction-kernels="rows=4 columns=16" --split-input-file | FileCheck %s --check-prefix=SMALL
// RUN: switchyard-opt %s --switchyard-cpu-contraction-kernels="panel-kib=1" --split-input-file | FileCheck %s --check-prefix=PANEL
// RUN: not switchyard-opt %s --switchyard-cpu-contraction-kernels="rows=0" --split-input-file 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: error: rows, columns and panel-kib must be positive

// dX = dY·W: W's rows are the vector rows; 8 rows of dX per tile (the
// first 16 of 20), then the last 4 one at a time; 48 columns: one full
// tile of 32 and a masked one. W (12 × 48 f32) is far smaller than the
// 256 KiB panel: one block of columns, [0, 48).
// CHECK-LABEL: func.func @matmul
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.transpose
// CHECK: scf.for %[[NB:.*]] = %c0 to %c48 step %c5440
// CHECK: %[[END:.*]] = arith.minui %{{.*}}, %c48 : index
// CHECK: %[[FULL:.*]] = arith.subi %c20, %{{.*}} : index
// CHECK: scf.for %[[M:.*]] = %{{.*}} to %[[FULL]] step %c8
// CHECK:   scf.for %[[N:.*]] = %[[NB]] to %[[END]] step %c32
// CHECK:     %[[ACC0:.*]] = vector.transfer_read %[[DX:.*]][%[[M]], %[[N]]], %{{.*}} : memref<20x48xf32>, vector<32xf32>
// CHECK:     scf.for %[[K:[a-z0-9_]+]] = %{{.*}} to %c12 step %{{.*}} iter_args(%[[A0:[a-z0-9_]+]] = %[[ACC0]], {{.*}}) -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// CHECK:       %[[ROW:.*]] = vector.transfer_read %[[W:.*]][%[[K]], %[[N]]], %{{.*}} : memref<12x48xf32>, vector<32xf32>
// CHECK:       %[[S:.*]] = memref.load %[[DY:.*]][%[[M]], %[[K]]] : memref<20x12xf32>
// CHECK:       %[[SPLAT:.*]] = vector.broadcast %[[S]] : f32 to vector<32xf32>
// CHECK:       vector.fma %[[SPLAT]], %[[ROW]], %[[A0]] : vector<32xf32>
// CHECK-COUNT-7: vector.fma
// CHECK:       scf.yield
// CHECK-COUNT-8: vector.transfer_write
// The rows past the last full tile, one at a time.
// CHECK: scf.for %{{.*}} = %[[FULL]] to %c20 step %c1
// CHECK:   vector.fma
// CHECK-NOT: vector.fma
// CHECK: return
// SMALL-LABEL: func.func @matmul
// SMALL: scf.for %{{.*}} step %c4
// SMALL:   scf.for %{{.*}} step %c16
// SMALL-COUNT-4: vector.fma {{.*}} : vector<16xf32>
// With a 1 KiB panel (under 12 rows × 32 columns of f32), blocks of one
// tile: every row tile runs over columns [0, 32), then over [32, 48).
// PANEL-LABEL: func.func @matmul
// PANEL: scf.for %[[NB:.*]] = %c0 to %c48 step %c32 {
// PANEL:   %[[NEXT:.*]] = arith.addi %[[NB]], %{{.*}} : index
// PANEL:   %[[END:.*]] = arith.minui %[[NEXT]], %c48 : index
// PANEL:   scf.for %[[M:.*]] = %{{.*}} step %c8
// PANEL:     scf.for %{{.*}} = %[[NB]] to %[[END]] step %c32
func.func @matmul(%dy: memref<20x12xf32>, %w: memref<12x48xf32>, %dx: memref<20x48xf32>) {
  linalg.matmul ins(%dy, %w : memref<20x12xf32>, memref<12x48xf32>) outs(%dx : memref<20x48xf32>)
  return
}

// -----

// Y = X·Wᵀ: W's last index is the reduction, so W is first copied with its
// dimensions swapped; the copy is freed after the kernel.
// CHECK-LABEL: func.func @transposed
// CHECK: %[[WT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<6x40xf32>
// CHECK: linalg.transpose ins(%{{.*}} : memref<40x6xf32>) outs(%[[WT]] : memref<6x40xf32>) permutation = [1, 0]
// CHECK: vector.transfer_read %[[WT]]
// CHECK: memref.dealloc %[[WT]]
func.func @transposed(%x: memref<8x6xf32>, %w: memref<40x6xf32>, %y: memref<8x40xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, o, i) -> (n, i)>, affine_map<(n, o, i) -> (o, i)>, affine_map<(n, o, i) -> (n, o)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<8x6xf32>, memref<40x6xf32>) outs(%y : memref<8x40xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A batch dimension (dynamic) is a loop around the tiles; the rounding of
// the factors (switchyard-round-contraction-operands) is replayed on the
// loaded scalars and rows.
// CHECK-LABEL: func.func @batched_rounded
// CHECK: %[[B:.*]] = memref.dim %{{.*}}, %c0
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[B]] step %c1
// CHECK: %[[ROW:.*]] = vector.transfer_read %{{.*}}[%[[I]], %{{.*}}, %{{.*}}], %{{.*}} : memref<?x5x32xf32>, vector<32xf32>
// CHECK: %[[RT:.*]] = arith.truncf %[[ROW]] : vector<32xf32> to vector<32xbf16>
// CHECK: %[[RE:.*]] = arith.extf %[[RT]] : vector<32xbf16> to vector<32xf32>
// CHECK: %[[S:.*]] = memref.load
// CHECK: %[[ST:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: %[[SE:.*]] = arith.extf %[[ST]] : bf16 to f32
// CHECK: %[[SPLAT:.*]] = vector.broadcast %[[SE]]
// CHECK: vector.fma %[[SPLAT]], %[[RE]]
func.func @batched_rounded(%a: memref<?x3x5xf32>, %b: memref<?x5x32xf32>, %c: memref<?x3x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%a, %b : memref<?x3x5xf32>, memref<?x5x32xf32>) outs(%c : memref<?x3x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xt = arith.truncf %x : f32 to bf16
    %xe = arith.extf %xt : bf16 to f32
    %yt = arith.truncf %y : f32 to bf16
    %ye = arith.extf %yt : bf16 to f32
    %p = arith.mulf %xe, %ye : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Output rows shorter than min-columns (16), bodies that are not a plain
// multiply-add, and an input that is the output buffer itself are left to
// switchyard-cpu-loop-order.
// CHECK-LABEL: func.func @left_alone
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK-NOT: vector.fma
func.func @left_alone(%x: memref<8x6xf32>, %w: memref<6x10xf32>, %y: memref<8x10xf32>, %w2: memref<6x32xf32>, %y2: memref<8x32xf32>, %sq: memref<32x32xf32>) {
  linalg.matmul ins(%x, %w : memref<8x6xf32>, memref<6x10xf32>) outs(%y : memref<8x10xf32>)
  linalg.generic {indexing_maps = [affine_map<(n, o, i) -> (n, i)>, affine_map<(n, o, i) -> (i, o)>, affine_map<(n, o, i) -> (n, o)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w2 : memref<8x6xf32>, memref<6x32xf32>) outs(%y2 : memref<8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %e = math.exp %m : f32
    %s = arith.addf %c, %e : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%y2, %sq : memref<8x32xf32>, memref<32x32xf32>) outs(%y2 : memref<8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// RUN: switchyard-opt %s --switchyard-cpu-contraction-kernels --split-input-file | FileCheck %s
// RUN: switchyard-opt %s --switchyard-cpu-contraction-kernels="rows=4 columns=16" --split-input-file | FileCheck %s --check-prefix=SMALL
// RUN: switchyard-opt %s --switchyard-cpu-contraction-kernels="panel-kib=1" --split-input-file | FileCheck %s --check-prefix=PANEL
// RUN: not switchyard-opt %s --switchyard-cpu-contraction-kernels="rows=0" --split-input-file 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: error: rows, columns and panel-kib must be positive

// dX = dY·W: W's rows are the vector rows; 8 rows of dX per tile (the
// first 16 of 20), then the last 4 one at a time; 48 columns: one full
// tile of 32 and a narrow one of 16 (the last tile at most half full: 16
// columns wide, not 32 with 16 of them masked). Two tiles in all: blocks
// of one tile, so that the parallel loop over the blocks has more than one
// iteration. Each block copies its part of W (12 steps of the reduction ×
// 32 columns, zero past column 48) into a panel on the stack, which every
// row tile reads.
// CHECK-LABEL: func.func @matmul
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.transpose
// CHECK: scf.for %[[NB:.*]] = %c0 to %c48 step %c32
// CHECK: %[[END:.*]] = arith.minui %{{.*}}, %c48 : index
// CHECK: %[[STACK:.*]] = llvm.intr.stacksave
// CHECK:   %[[BPANEL:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x12x32xf32>
// CHECK:   scf.for %[[K0:.*]] = %{{.*}} to %c12 step %c12{{.*}} {
// CHECK:     %[[LEN:.*]] = arith.minui
// CHECK:     scf.for %[[KK:.*]] = %{{.*}} to %[[LEN]]
// CHECK:       %[[K:.*]] = arith.addi %[[K0]], %[[KK]]
// CHECK:       scf.for %[[NP:.*]] = %[[NB]] to %[[END]] step %c32
// CHECK:         %[[WROW:.*]] = vector.transfer_read %[[W:.*]][%[[K]], %[[NP]]], %{{.*}} : memref<12x48xf32>, vector<32xf32>
// CHECK:         vector.transfer_write %[[WROW]], %[[BPANEL]][%{{.*}}, %[[KK]], %{{.*}}] {in_bounds = [true]}
// CHECK:     %[[FULL:.*]] = arith.subi %c20, %{{[0-9]+}} : index
// CHECK:     scf.for %[[M:.*]] = %{{.*}} to %[[FULL]] step %c8
// CHECK:       %[[MAIN:.*]] = arith.minui %[[END]], %c32
// CHECK:       scf.for %[[N:.*]] = %[[NB]] to %[[MAIN]] step %c32
// CHECK:         %[[TILE:.*]] = arith.divui
// CHECK:         %[[ACC0:.*]] = vector.transfer_read %[[DX:.*]][%[[M]], %[[N]]], %{{.*}} : memref<20x48xf32>, vector<32xf32>
// CHECK:         scf.for %[[S:[a-z0-9_]+]] = %{{.*}} to %[[LEN]] step %{{.*}} iter_args(%[[A0:[a-z0-9_]+]] = %[[ACC0]], {{.*}}) -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>)
// CHECK:           %[[KS:.*]] = arith.addi %[[K0]], %[[S]]
// CHECK:           %[[ROW:.*]] = vector.transfer_read %[[BPANEL]][%[[TILE]], %[[S]], %{{.*}}], %{{.*}} {in_bounds = [true]} : memref<1x12x32xf32>, vector<32xf32>
// CHECK:           %[[X:.*]] = memref.load %[[DY:.*]][%[[M]], %[[KS]]] : memref<20x12xf32>
// CHECK:           %[[SPLAT:.*]] = vector.broadcast %[[X]] : f32 to vector<32xf32>
// CHECK:           vector.fma %[[SPLAT]], %[[ROW]], %[[A0]] : vector<32xf32>
// CHECK-COUNT-7:   vector.fma
// CHECK:           scf.yield
// CHECK-COUNT-8:   vector.transfer_write
// The narrow tile, in the block that holds column 32 (a loop of at most
// one iteration), within the row: no mask.
// CHECK:       %[[NARROW:.*]] = arith.maxui %[[NB]], %c32
// CHECK:       scf.for %{{.*}} = %[[NARROW]] to %[[END]] step %c32
// CHECK:         vector.transfer_read %[[DX]]{{.*}} {in_bounds = [true]} : memref<20x48xf32>, vector<16xf32>
// CHECK:         vector.transfer_read %[[BPANEL]]{{.*}} : memref<1x12x32xf32>, vector<16xf32>
// CHECK-COUNT-8:   vector.fma {{.*}} : vector<16xf32>
// CHECK-COUNT-8:   vector.transfer_write {{.*}} {in_bounds = [true]} : vector<16xf32>, memref<20x48xf32>
// The rows past the last full tile, one at a time.
// CHECK:     scf.for %{{.*}} = %[[FULL]] to %c20 step %c1
// CHECK:       vector.fma {{.*}} : vector<32xf32>
// CHECK:       vector.fma {{.*}} : vector<16xf32>
// CHECK-NOT: vector.fma
// CHECK: llvm.intr.stackrestore %[[STACK]]
// CHECK: } {switchyard.parallel}
// CHECK: return
// SMALL-LABEL: func.func @matmul
// SMALL: scf.for %{{.*}} step %c4
// SMALL:   scf.for %{{.*}} step %c16
// SMALL-COUNT-4: vector.fma {{.*}} : vector<16xf32>
// With a 1 KiB panel, chunks of 2 steps of the reduction (a panel of 4
// tiles of 32 columns within 1 KiB): the output tiles are read and written
// once per chunk.
// PANEL-LABEL: func.func @matmul
// PANEL: scf.for %[[NB:.*]] = %c0 to %c48 step %c32 {
// PANEL:   memref.alloca() {alignment = 64 : i64} : memref<1x2x32xf32>
// PANEL:   scf.for %{{.*}} = %{{.*}} to %c12 step %c2
// PANEL:     scf.for %[[M:[a-z0-9_]+]] = %{{.*}} step %c8
// PANEL:       vector.transfer_read %{{.*}}[%[[M]], %{{.*}}], %{{.*}} : memref<20x48xf32>, vector<32xf32>
func.func @matmul(%dy: memref<20x12xf32>, %w: memref<12x48xf32>, %dx: memref<20x48xf32>) {
  linalg.matmul ins(%dy, %w : memref<20x12xf32>, memref<12x48xf32>) outs(%dx : memref<20x48xf32>)
  return
}

// -----

// Y = X·Wᵀ: W's last index is the reduction, so its panel is copied element
// by element, the reduction innermost (W's rows); the columns past the end
// of Y's row (40 of the panel's 64) read W's last row and store zero. The
// last 8 columns are a narrow tile of 16, masked.
// CHECK-LABEL: func.func @transposed
// CHECK-NOT: linalg.transpose
// CHECK: %[[BPANEL:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x6x32xf32>
// CHECK: scf.for %{{.*}} to %c6 step
// CHECK:   scf.for %[[N:[a-z0-9_]+]] =
// CHECK:   %[[INSIDE:.*]] = arith.cmpi ult, %[[N]], %c40
// CHECK:   %[[ROW:.*]] = arith.minui %[[N]], %{{.*}}
// CHECK:   scf.for %[[KK:.*]] =
// CHECK:     %[[K:.*]] = arith.addi %{{.*}}, %[[KK]]
// CHECK:     %[[V:.*]] = memref.load %{{.*}}[%[[ROW]], %[[K]]] : memref<40x6xf32>
// CHECK:     %[[Z:.*]] = arith.select %[[INSIDE]], %[[V]], %{{.*}} : f32
// CHECK:     memref.store %[[Z]], %[[BPANEL]][%{{.*}}, %[[KK]], %{{.*}}]
// CHECK: vector.transfer_read %[[BPANEL]]
// CHECK: %[[NARROW:.*]] = arith.maxui %{{.*}}, %c32
// CHECK: scf.for %{{.*}} = %[[NARROW]] to
// CHECK:   vector.transfer_read %{{.*}}, %{{.*}} : memref<8x40xf32>, vector<16xf32>
// CHECK:   vector.transfer_read %[[BPANEL]]{{.*}} : memref<1x6x32xf32>, vector<16xf32>
// CHECK:   vector.transfer_write %{{.*}} : vector<16xf32>, memref<8x40xf32>
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

// dW = dYᵀ·X: the tile's rows of a (dY's columns) lie side by side in each
// step of the reduction (dY's rows), a stride of dY's row apart: each row
// tile first copies its 8 columns of dY, step by step, into a panel of its
// own, from which the kernel reads its scalars. So that each part of dY is
// copied once, the parallel loop runs over groups of 8 row tiles (64 rows),
// each over all of dW's 33 columns (a panel of 2 tiles).
// CHECK-LABEL: func.func @weight_gradient
// CHECK: scf.for %[[G:[a-z0-9_]+]] = %c0 to %c40 step %c64
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<2x16x32xf32>
// CHECK: %[[APANEL:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16x8xf32>
// CHECK: scf.for %[[M:[a-z0-9_]+]] = %[[G]] to %{{.*}} step %c8
// CHECK:   scf.for %[[KK:.*]] =
// CHECK:     %[[K:.*]] = arith.addi %{{.*}}, %[[KK]]
// CHECK:     %[[COLS:.*]] = vector.transfer_read %{{.*}}[%[[K]], %[[M]]], %{{.*}} {in_bounds = [true]} : memref<16x40xf32>, vector<8xf32>
// CHECK:     vector.transfer_write %[[COLS]], %[[APANEL]][%[[KK]], %{{.*}}] {in_bounds = [true]}
// CHECK:   scf.for
// CHECK:     scf.for %[[S:[a-z0-9_]+]] =
// CHECK:       memref.load %[[APANEL]][%[[S]], %{{.*}}] : memref<16x8xf32>
// CHECK-COUNT-7: memref.load %[[APANEL]]
// CHECK: } {switchyard.parallel}
func.func @weight_gradient(%dy: memref<16x40xf32>, %x: memref<16x33xf32>, %dw: memref<40x33xf32>) {
  linalg.generic {indexing_maps = [affine_map<(o, i, t) -> (t, o)>, affine_map<(o, i, t) -> (t, i)>, affine_map<(o, i, t) -> (o, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dy, %x : memref<16x40xf32>, memref<16x33xf32>) outs(%dw : memref<40x33xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Two reductions (the heads and their features): b is read where it is,
// after a transposed copy where n is not its last dimension; the copy is
// freed after the kernel.
// CHECK-LABEL: func.func @two_reductions
// CHECK: %[[WT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x6x40xf32>
// CHECK: linalg.transpose ins(%{{.*}} : memref<40x2x6xf32>) outs(%[[WT]] : memref<2x6x40xf32>) permutation = [1, 2, 0]
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     vector.transfer_read %[[WT]]
// CHECK: memref.dealloc %[[WT]]
func.func @two_reductions(%x: memref<8x2x6xf32>, %w: memref<40x2x6xf32>, %y: memref<8x40xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, o, h, f) -> (n, h, f)>, affine_map<(n, o, h, f) -> (o, h, f)>, affine_map<(n, o, h, f) -> (n, o)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%x, %w : memref<8x2x6xf32>, memref<40x2x6xf32>) outs(%y : memref<8x40xf32>) {
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
// CHECK: vector.transfer_read %{{.*}}[%[[I]], %{{.*}}, %{{.*}}], %{{.*}} : memref<?x5x32xf32>, vector<32xf32>
// CHECK: %[[ROW:.*]] = vector.transfer_read %{{.*}} {in_bounds = [true]} : memref<1x5x32xf32>, vector<32xf32>
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

// -----

// dW = Σ_{b,t} dY[b, t, o] · X[b, t, i]: two reductions where a is copied
// anyway (dYᵀ): packed as one reduction of 2 × 16 steps, each step's
// (b, t) from its linear index.
// CHECK-LABEL: func.func @batched_weight_gradient
// CHECK-NOT: linalg.transpose
// CHECK: %[[APANEL:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32x8xf32>
// CHECK: scf.for %[[K0:.*]] = %{{.*}} to %{{.*}} step %c32
// CHECK:   scf.for %[[KK:[a-z0-9_]+]] =
// CHECK:     %[[K:.*]] = arith.addi %[[K0]], %[[KK]]
// CHECK:     %[[T:.*]] = arith.remui %[[K]], %c16
// CHECK:     %[[B:.*]] = arith.divui %[[K]], %c16
// CHECK:     vector.transfer_read %{{.*}}[%[[B]], %[[T]], %{{.*}}], %{{.*}} : memref<2x16x33xf32>, vector<32xf32>
// CHECK: memref.load %[[APANEL]]
func.func @batched_weight_gradient(%dy: memref<2x16x40xf32>, %x: memref<2x16x33xf32>, %dw: memref<40x33xf32>) {
  linalg.generic {indexing_maps = [affine_map<(o, i, b, t) -> (b, t, o)>, affine_map<(o, i, b, t) -> (b, t, i)>, affine_map<(o, i, b, t) -> (o, i)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%dy, %x : memref<2x16x40xf32>, memref<2x16x33xf32>) outs(%dw : memref<40x33xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A fill of zeros right before the matmul, into its output: folded. Each
// tile starts from zero vectors in the first chunk of the reduction and
// reads the output back only in the chunks after it; no fill is left.
// CHECK-LABEL: func.func @zero_filled
// CHECK-NOT: linalg.fill
// CHECK: scf.for %[[K0:.*]] = %{{.*}} to %c12 step %c12
// CHECK:   %[[ZEROS:.*]] = arith.constant dense<0.000000e+00> : vector<32xf32>
// CHECK:   %[[FIRST:.*]] = arith.cmpi eq, %[[K0]], %c0{{.*}} : index
// CHECK:   scf.if %[[FIRST]] -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>) {
// CHECK-NEXT: scf.yield %[[ZEROS]], %[[ZEROS]], %[[ZEROS]], %[[ZEROS]], %[[ZEROS]], %[[ZEROS]], %[[ZEROS]], %[[ZEROS]]
// CHECK-NEXT: } else {
// CHECK-COUNT-8: vector.transfer_read %{{.*}} : memref<20x48xf32>, vector<32xf32>
// CHECK: vector.fma
func.func @zero_filled(%dy: memref<20x12xf32>, %w: memref<12x48xf32>, %dx: memref<20x48xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%dx : memref<20x48xf32>)
  linalg.matmul ins(%dy, %w : memref<20x12xf32>, memref<12x48xf32>) outs(%dx : memref<20x48xf32>)
  return
}

// -----

// A reduction of dynamic length (dW over the tokens) may be empty, and then
// writes no tile: the fill stays, for that case only.
// CHECK-LABEL: func.func @zero_filled_dynamic_reduction
// CHECK: %[[T:.*]] = memref.dim %{{.*}}, %c0 : memref<?x40xf32>
// CHECK: %[[NONE:.*]] = arith.cmpi eq, %[[T]], %c0{{.*}} : index
// CHECK: scf.if %[[NONE]] {
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: }
// CHECK: vector.fma
func.func @zero_filled_dynamic_reduction(%dy: memref<?x40xf32>, %x: memref<?x33xf32>, %dw: memref<40x33xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%dw : memref<40x33xf32>)
  linalg.generic {indexing_maps = [affine_map<(o, i, t) -> (t, o)>, affine_map<(o, i, t) -> (t, i)>, affine_map<(o, i, t) -> (o, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dy, %x : memref<?x40xf32>, memref<?x33xf32>) outs(%dw : memref<40x33xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not folded: a fill of another value, a fill of another buffer, and a
// fill with a write between it and the matmul. Each tile reads the output.
// CHECK-LABEL: func.func @not_zero_filled
// CHECK-COUNT-3: linalg.fill
// CHECK-NOT: scf.if
func.func @not_zero_filled(%dy: memref<20x12xf32>, %w: memref<12x48xf32>, %dx: memref<20x48xf32>, %other: memref<20x48xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%dx : memref<20x48xf32>)
  linalg.matmul ins(%dy, %w : memref<20x12xf32>, memref<12x48xf32>) outs(%dx : memref<20x48xf32>)
  linalg.fill ins(%zero : f32) outs(%other : memref<20x48xf32>)
  linalg.matmul ins(%dy, %w : memref<20x12xf32>, memref<12x48xf32>) outs(%dx : memref<20x48xf32>)
  linalg.fill ins(%zero : f32) outs(%dx : memref<20x48xf32>)
  %c0 = arith.constant 0 : index
  memref.store %one, %dx[%c0, %c0] : memref<20x48xf32>
  linalg.matmul ins(%dy, %w : memref<20x12xf32>, memref<12x48xf32>) outs(%dx : memref<20x48xf32>)
  return
}

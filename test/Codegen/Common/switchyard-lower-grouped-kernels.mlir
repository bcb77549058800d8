// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-lower-grouped-kernels{element-type=bf16},canonicalize))" | FileCheck %s
// RUN: not switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-lower-grouped-kernels{element-type=f8}))" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: switchyard-lower-grouped-kernels: unsupported element-type 'f8'; expected f32, bf16 or f16

// One thread per output element: a tile whose expert is past the last
// (padding) keeps its rows; the others sum their expert's products, the
// factors rounded to bf16.
// CHECK-LABEL: func.func @buffers
// CHECK-SAME: (%[[ROWS:.*]]: memref<?x8xbf16>, %[[W:.*]]: memref<3x4x8xf32>, %[[TE:.*]]: memref<?xindex>, %[[OUT:.*]]: memref<?x4xf32>, %[[SEG:.*]]: memref<4xindex>, %[[DW:.*]]: memref<3x8x4xf32>, %[[DY:.*]]: memref<?x4xf32>)
// CHECK: scf.parallel (%[[P:.*]], %[[C:.*]]) =
// CHECK:   %[[T:.*]] = arith.divui %[[P]], %c16
// CHECK:   %[[E:.*]] = memref.load %[[TE]][%[[T]]]
// CHECK:   %[[VALID:.*]] = arith.cmpi ult, %[[E]], %c3
// CHECK:   scf.if %[[VALID]] {
// CHECK:     %[[INIT:.*]] = memref.load %[[OUT]][%[[P]], %[[C]]]
// CHECK:     %[[SUM:.*]] = scf.for %[[A:.*]] = %c0 to %c8 step %c1 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK:       %[[X:.*]] = memref.load %[[ROWS]][%[[P]], %[[A]]]
// CHECK:       %[[WV:.*]] = memref.load %[[W]][%[[E]], %[[C]], %[[A]]]
// CHECK:       %[[WR:.*]] = arith.truncf %[[WV]] : f32 to bf16
// CHECK:       %[[WE:.*]] = arith.extf %[[WR]] : bf16 to f32
// CHECK:       %[[PROD:.*]] = arith.mulf %{{.*}}, %[[WE]] : f32
// CHECK:       arith.addf %[[ACC]], %[[PROD]] : f32
// CHECK:     memref.store %[[SUM]], %[[OUT]][%[[P]], %[[C]]]
// CHECK: scf.parallel (%[[E2:.*]], %[[A2:.*]], %[[C2:.*]]) = (%c0, %c0, %c0) to (%c3, %c8, %c4)
// CHECK:   %[[LO:.*]] = memref.load %[[SEG]][%[[E2]]]
// CHECK:   %[[HI:.*]] = memref.load %[[SEG]][%{{.*}}]
// CHECK:   scf.for %[[Q:.*]] = %[[LO]] to %[[HI]] step %c1
// CHECK:     memref.load %[[ROWS]][%[[Q]], %[[A2]]]
// CHECK:     memref.load %[[DY]][%[[Q]], %[[C2]]]
// CHECK:   memref.store %{{.*}}, %[[DW]][%[[E2]], %[[A2]], %[[C2]]]
func.func @buffers(%rows: memref<?x8xbf16>, %w: memref<3x4x8xf32>,
                   %te: memref<?xindex>, %out: memref<?x4xf32>,
                   %seg: memref<4xindex>, %dw: memref<3x8x4xf32>, %dy: memref<?x4xf32>) {
  moe.grouped_matmul ins(%rows, %w, %te : memref<?x8xbf16>, memref<3x4x8xf32>, memref<?xindex>) outs(%out : memref<?x4xf32>) tile_size(16) transpose_weight
  moe.grouped_weight_grad ins(%rows, %dy, %seg : memref<?x8xbf16>, memref<?x4xf32>, memref<4xindex>) outs(%dw : memref<3x8x4xf32>)
  return
}

// A gathered operand: row p is route order[p]'s row of x (6 routes per
// row), times its gate in f32, zero where order[p] is past the routes (the
// padding), then rounded.
// CHECK-LABEL: func.func @gathered
// CHECK-SAME: (%[[X:.*]]: memref<?x8xf32>, %{{.*}}: memref<3x8x4xf32>, %{{.*}}: memref<?xindex>, %[[ORDER:.*]]: memref<?xindex>, %[[G:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?x4xf32>)
// CHECK: scf.parallel (%[[P:.*]], %{{.*}}) =
// CHECK:   scf.if
// CHECK:     %[[TOKENS:.*]] = memref.dim %[[X]], %c0
// CHECK:     %[[ROUTES:.*]] = arith.muli %[[TOKENS]], %c6
// CHECK:     %[[R:.*]] = memref.load %[[ORDER]][%[[P]]]
// CHECK:     %[[VALID:.*]] = arith.cmpi ult, %[[R]], %[[ROUTES]]
// CHECK:     %[[SAFE:.*]] = arith.select %[[VALID]], %[[R]], %c0
// CHECK:     %[[ROW:.*]] = arith.divui %[[SAFE]], %c6
// CHECK:     scf.for %[[A:.*]] = %c0 to %c8
// CHECK:       %[[V:.*]] = memref.load %[[X]][%[[ROW]], %[[A]]]
// CHECK:       %[[GATE:.*]] = memref.load %[[G]][%[[SAFE]]]
// CHECK:       %[[GATED:.*]] = arith.mulf %[[V]], %[[GATE]] : f32
// CHECK:       %[[F:.*]] = arith.select %[[VALID]], %[[GATED]], %cst : f32
// CHECK:       arith.truncf %[[F]] : f32 to bf16
// Both operands of a weight gradient gathered, by token and by head.
// CHECK-LABEL: func.func @gathered_weight_grad
// CHECK: scf.for %[[Q:[a-z0-9_]+]] =
// CHECK:   memref.load %{{.*}}[%[[Q]]] : memref<?xindex>
// CHECK:   arith.divui %{{.*}}, %c6
// CHECK:   memref.load %{{.*}}[%[[Q]]] : memref<?xindex>
// CHECK:   arith.divui %{{.*}}, %c3
func.func @gathered(%x: memref<?x8xf32>, %w: memref<3x8x4xf32>,
                    %te: memref<?xindex>, %order: memref<?xindex>,
                    %g: memref<?xf32>, %out: memref<?x4xf32>) {
  moe.grouped_matmul ins(%x, %w, %te : memref<?x8xf32>, memref<3x8x4xf32>, memref<?xindex>) gather(%order : memref<?xindex>) routes_per_row(6) gates(%g : memref<?xf32>) outs(%out : memref<?x4xf32>) tile_size(16)
  return
}
func.func @gathered_weight_grad(%x: memref<?x8xf32>, %dh: memref<?x4xf32>,
                                %seg: memref<4xindex>, %order: memref<?xindex>,
                                %g: memref<?xf32>, %dw: memref<3x8x4xf32>) {
  moe.grouped_weight_grad ins(%x, %dh, %seg : memref<?x8xf32>, memref<?x4xf32>, memref<4xindex>) gather(%order : memref<?xindex>) routes_per_row([6, 3]) rhs_gates(%g : memref<?xf32>) outs(%dw : memref<3x8x4xf32>)
  return
}

// The routes' sort, sequentially: counts into segments[e + 1], the padded
// segments, each expert's cursor from its start, the order filled with R,
// each route placed, the tiles' experts.
// CHECK-LABEL: func.func @sort
// CHECK-SAME: (%[[I:.*]]: memref<?x2x3xi32>, %[[SEG:.*]]: memref<11xindex>, %[[ORDER:.*]]: memref<?xindex>, %[[SLOTS:.*]]: memref<?x2x3xindex>, %[[TILES:.*]]: memref<?xindex>)
// CHECK: %[[R:.*]] = arith.muli %{{.*}}, %c6
// CHECK: scf.for %{{.*}} = %c0 to %c11
// CHECK: scf.for %{{.*}} = %c0 to %[[R]]
// CHECK:   memref.load %[[I]]
// CHECK: scf.for %{{.*}} = %c0 to %c10
// CHECK:   arith.ceildivui %{{.*}}, %c64
// CHECK: %[[CURSOR:.*]] = memref.alloc() : memref<10xindex>
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 {
// CHECK:   memref.store %[[R]], %[[ORDER]]
// CHECK: scf.for %[[ROUTE:.*]] = %c0 to %[[R]]
// CHECK:   %[[SLOT:.*]] = memref.load %[[CURSOR]]
// CHECK:   memref.store %[[SLOT]], %[[SLOTS]]
// CHECK:   memref.store %[[ROUTE]], %[[ORDER]][%[[SLOT]]]
// CHECK: memref.dealloc %[[CURSOR]]
// CHECK: memref.store %{{.*}}, %[[TILES]]
func.func @sort(%i: memref<?x2x3xi32>, %seg: memref<11xindex>, %order: memref<?xindex>, %slots: memref<?x2x3xindex>, %tiles: memref<?xindex>) {
  moe.sort_routes ins(%i : memref<?x2x3xi32>) outs(%seg, %order, %slots, %tiles : memref<11xindex>, memref<?xindex>, memref<?x2x3xindex>, memref<?xindex>) experts_per_head(5) tile_size(64)
  return
}

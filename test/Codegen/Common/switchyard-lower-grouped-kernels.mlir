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

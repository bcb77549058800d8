// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-cpu-grouped-kernels{rows=8 columns=32},canonicalize,cse))" | FileCheck %s
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-cpu-grouped-kernels{rows=6 columns=16},canonicalize,cse))" | FileCheck %s --check-prefix=AVX2
// RUN: not switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-cpu-grouped-kernels{rows=0}))" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: rows, columns and panel-kib must be positive

// One tile of 8 rows per iteration of the parallel loop; padding tiles
// (expert 3 or more) skip. The tile's rows are gathered by route, gated
// and zeroed at padding positions into a panel on the stack; then each
// block of columns accumulates 8 rows in registers over the reduction,
// one row of the expert's weight per step: two in-bounds blocks of 32 and
// a masked one of 16 for 76 columns.
// CHECK-LABEL: func.func @gathered
// CHECK-SAME: (%[[X:.*]]: memref<?x40xf32>, %[[W:.*]]: memref<3x40x76xf32>, %[[TE:.*]]: memref<?xindex>, %[[ORDER:.*]]: memref<?xindex>, %[[G:.*]]: memref<?xf32>, %[[OUT:.*]]: memref<?x76xf32>)
// CHECK: scf.for %[[T:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK:   %[[E:.*]] = memref.load %[[TE]][%[[T]]]
// CHECK:   %[[VALID:.*]] = arith.cmpi ult, %[[E]], %c3
// CHECK:   %[[FIRST:.*]] = arith.muli %[[T]], %c8
// CHECK:   scf.if %[[VALID]] {
// CHECK:     llvm.intr.stacksave
// CHECK:     %[[PANEL:.*]] = memref.alloca() {alignment = 64 : i64} : memref<8x40xf32>
// CHECK:     scf.for %[[R:.*]] = %c0 to %c8 step %c1 {
// CHECK:       %[[P:.*]] = arith.addi %[[FIRST]], %[[R]]
// CHECK:       %[[ROUTE:.*]] = memref.load %[[ORDER]][%[[P]]]
// CHECK:       %[[ROW:.*]] = arith.divui %{{.*}}, %c6
// CHECK:       scf.for %[[A:.*]] = %c0 to %c40 step %c1 {
// CHECK:         memref.load %[[X]][%[[ROW]], %[[A]]]
// CHECK:         memref.load %[[G]]
// CHECK:         arith.select
// CHECK:         memref.store %{{.*}}, %[[PANEL]][%[[R]], %[[A]]]
// CHECK:     scf.for %[[C:.*]] = %c0 to %c64 step %c32 {
// CHECK-COUNT-8: vector.transfer_read %[[OUT]]{{.*}} {in_bounds = [true]} : memref<?x76xf32>, vector<32xf32>
// CHECK:       scf.for %[[K:.*]] = %c0 to %c40 step %c1 iter_args
// CHECK:         %[[WROW:.*]] = vector.transfer_read %[[W]][%[[E]], %[[K]], %[[C]]]{{.*}}vector<32xf32>
// CHECK:         memref.load %[[PANEL]][%c0, %[[K]]]
// CHECK:         vector.fma %{{.*}}, %[[WROW]]
// CHECK-COUNT-7: vector.fma
// CHECK-COUNT-8: vector.transfer_write {{.*}} {in_bounds = [true]} : vector<32xf32>, memref<?x76xf32>
// CHECK:     vector.transfer_read %[[OUT]][%[[FIRST]], %c64], %cst : memref<?x76xf32>, vector<16xf32>
// CHECK:     llvm.intr.stackrestore
// CHECK: } {switchyard.parallel}

// AVX2's tile: 6 rows, then the other 2 of the 8-row tile.
// AVX2-LABEL: func.func @gathered
// AVX2: memref.alloca() {alignment = 64 : i64} : memref<8x40xf32>
// AVX2: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// AVX2: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (vector<16xf32>, vector<16xf32>)
func.func @gathered(%x: memref<?x40xf32>, %w: memref<3x40x76xf32>,
                    %te: memref<?xindex>, %order: memref<?xindex>,
                    %g: memref<?xf32>, %out: memref<?x76xf32>) {
  moe.grouped_matmul ins(%x, %w, %te : memref<?x40xf32>, memref<3x40x76xf32>, memref<?xindex>) gather(%order : memref<?xindex>) routes_per_row(6) gates(%g : memref<?xf32>) outs(%out : memref<?x76xf32>) tile_size(8)
  return
}

// A fill of zeros right before the op is folded: the tiles start from
// zero vectors instead of reading the output, and the padding tiles,
// which no tile writes, are zeroed.
// CHECK-LABEL: func.func @zero_filled
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<?x76xf32>)
// CHECK-NOT: linalg.fill
// CHECK: scf.for %[[T:.*]] = %c0 to
// CHECK:   %[[FIRST:.*]] = arith.muli %[[T]], %c8
// CHECK:   scf.if
// CHECK-NOT: vector.transfer_read %[[OUT]]
// CHECK:     vector.fma
// CHECK:   } else {
// CHECK:     %[[TILE:.*]] = memref.subview %[[OUT]][%[[FIRST]], 0] [8, 76] [1, 1]
// CHECK:     linalg.fill ins(%cst{{.*}} : f32) outs(%[[TILE]] :
// CHECK: } {switchyard.parallel}
func.func @zero_filled(%x: memref<?x40xf32>, %w: memref<3x40x76xf32>,
                       %te: memref<?xindex>, %order: memref<?xindex>,
                       %out: memref<?x76xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<?x76xf32>)
  moe.grouped_matmul ins(%x, %w, %te : memref<?x40xf32>, memref<3x40x76xf32>, memref<?xindex>) gather(%order : memref<?xindex>) routes_per_row(6) outs(%out : memref<?x76xf32>) tile_size(8)
  return
}

// A transposed weight is copied once into [E, A, C] order, so that its rows
// are unit-stride, and freed after the kernel.
// CHECK-LABEL: func.func @transposed
// CHECK: %[[COPY:.*]] = memref.alloc() {alignment = 64 : i64} : memref<3x8x40xf32>
// CHECK: linalg.transpose ins(%{{.*}} : memref<3x40x8xf32>) outs(%[[COPY]] : memref<3x8x40xf32>) permutation = [0, 2, 1]
// CHECK: scf.for
// CHECK:   vector.transfer_read %[[COPY]]
// CHECK: } {switchyard.parallel}
// CHECK: memref.dealloc %[[COPY]]
func.func @transposed(%rows: memref<?x8xf32>, %w: memref<3x40x8xf32>,
                      %te: memref<?xindex>, %out: memref<?x40xf32>) {
  moe.grouped_matmul ins(%rows, %w, %te : memref<?x8xf32>, memref<3x40x8xf32>, memref<?xindex>) outs(%out : memref<?x40xf32>) tile_size(8) transpose_weight
  return
}

// Per expert (the parallel loop), its segment in chunks of routes: both
// operands gathered into panels, then each 8 × 32 tile of the expert's
// [40, 76] gradient accumulates over the chunk; 40 rows are 5 tiles.
// CHECK-LABEL: func.func @weight_grad
// CHECK-SAME: (%[[X:.*]]: memref<?x40xf32>, %[[DH:.*]]: memref<?x76xf32>, %[[SEG:.*]]: memref<7xindex>, %{{.*}}: memref<?xindex>, %{{.*}}: memref<?xf32>, %[[DW:.*]]: memref<6x40x76xf32>)
// CHECK: scf.for %[[E:.*]] = %c0 to %c6 step %c1 {
// CHECK:   %[[LO:.*]] = memref.load %[[SEG]][%[[E]]]
// CHECK:   %[[HI:.*]] = memref.load %[[SEG]][%{{.*}}]
// CHECK:   %[[LP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<{{[0-9]+}}x40xf32>
// CHECK:   %[[RP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<{{[0-9]+}}x96xf32>
// CHECK:   scf.for %[[P0:.*]] = %[[LO]] to %[[HI]] step
// CHECK:     memref.store %{{.*}}, %[[LP]]
// CHECK:     memref.store %{{.*}}, %[[RP]]
// CHECK:     scf.for %[[A0:.*]] = %c0 to %c40 step %c8 {
// CHECK:       scf.for %[[C:.*]] = %c0 to %c64 step %c32 {
// CHECK:         vector.transfer_read %[[DW]][%[[E]], %[[A0]], %[[C]]]
// CHECK:         scf.for %[[I:.*]] = %c0 to %{{.*}} step %c1 iter_args
// CHECK:           vector.transfer_read %[[RP]][%[[I]], %[[C]]]
// CHECK:           memref.load %[[LP]][%[[I]], %[[A0]]]
// CHECK-COUNT-8:   vector.fma
// CHECK: } {switchyard.parallel}
func.func @weight_grad(%x: memref<?x40xf32>, %dh: memref<?x76xf32>,
                       %seg: memref<7xindex>, %order: memref<?xindex>,
                       %g: memref<?xf32>, %dw: memref<6x40x76xf32>) {
  moe.grouped_weight_grad ins(%x, %dh, %seg : memref<?x40xf32>, memref<?x76xf32>, memref<7xindex>) gather(%order : memref<?xindex>) routes_per_row([6, 3]) rhs_gates(%g : memref<?xf32>) outs(%dw : memref<6x40x76xf32>)
  return
}

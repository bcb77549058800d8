// RUN: switchyard-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(switchyard-gpu-map-parallel-loops{block-size=128}))" --verify-diagnostics | FileCheck %s

// A 2-D loop becomes one dimension of n*6 iterations, tiled by 128 with an
// in-bounds check, the tiles mapped to block_x and the iterations within a
// tile to thread_x; the original indices are recovered by div/rem.
// CHECK-LABEL: func.func @two_dims
// CHECK-SAME: (%[[M:.*]]: memref<?x6xf32>, %[[N:.*]]: index)
// CHECK: %[[ROWS:.*]] = arith.muli %{{.*}}, %[[N]] : index
// CHECK: %[[TOTAL:.*]] = arith.muli %[[ROWS]], %{{.*}} : index
// CHECK: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%[[TOTAL]]) step (%[[STEP:.*]]) {
// CHECK:   scf.parallel (%[[T:.*]]) = (%{{.*}}) to (%[[STEP]]) step (%{{.*}}) {
// CHECK:     %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %[[TOTAL]] : index
// CHECK:     scf.if %{{.*}} {
// CHECK:       arith.remsi
// CHECK:       arith.divsi
// CHECK:       memref.store
// CHECK:   } {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
func.func @two_dims(%m: memref<?x6xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c6) step (%c1, %c1) {
    memref.store %zero, %m[%i, %j] : memref<?x6xf32>
  }
  return
}

// -----

func.func @bad_block_size() {
  return
}
// RUN: not switchyard-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(switchyard-gpu-map-parallel-loops{block-size=0}))" 2>&1 | FileCheck %s --check-prefix=BLOCK
// BLOCK: switchyard-gpu-map-parallel-loops: block-size must be in [1, 1024], found 0

// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-sort-routes,canonicalize))" | FileCheck %s
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-sort-routes{block-size=128}))" | FileCheck %s --check-prefix=SMALL

// One block of 256 threads, a scratch column of counts per thread over the
// 10 expert rows; each thread counts its chunk of the R = N·6 routes, one
// thread per expert row turns its row into prefix sums over the threads,
// thread 0 pads the segments to 64 rows, all fill the order and the tiles'
// experts, then each places its routes: a barrier between each step.
// CHECK-LABEL: func.func @sort
// CHECK-SAME: (%[[I:.*]]: memref<?x2x3xi32>, %[[SEG:.*]]: memref<11xindex>, %[[ORDER:.*]]: memref<?xindex>, %[[SLOTS:.*]]: memref<?x2x3xindex>, %[[TILES:.*]]: memref<?xindex>)
// CHECK: %[[R:.*]] = arith.muli %{{.*}}, %c6
// CHECK: %[[SCRATCH:.*]] = gpu.alloc  (%c10) : memref<?x256xindex>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c256, {{.*}} = %c1, {{.*}} = %c1)
// CHECK:   %[[CHUNK:.*]] = arith.ceildivui %[[R]], %c256
// CHECK:   %[[LO0:.*]] = arith.muli %[[T]], %[[CHUNK]]
// CHECK:   %[[LO:.*]] = arith.minui %[[LO0]], %[[R]]
// CHECK:   %[[HI:.*]] = arith.minui %{{.*}}, %[[R]]
// CHECK:   memref.store %c0, %[[SCRATCH]][%{{.*}}, %[[T]]]
// CHECK:   scf.for %{{.*}} = %[[LO]] to %[[HI]] step %c1 {
// CHECK:     memref.load %[[I]]
// CHECK:     memref.store %{{.*}}, %[[SCRATCH]][%{{.*}}, %[[T]]]
// CHECK:   gpu.barrier
// CHECK:   scf.for %[[E:.*]] = %[[T]] to %c10 step %c256 {
// CHECK:     scf.for %{{.*}} = %c0 to %c256 step %c1 iter_args
// CHECK:     memref.store %{{.*}}, %[[SEG]][%{{.*}}] : memref<11xindex>
// CHECK:   gpu.barrier
// CHECK:   scf.if
// CHECK:     memref.store %c0, %[[SEG]][%c0]
// CHECK:     arith.ceildivui %{{.*}}, %c64
// CHECK:   gpu.barrier
// CHECK:   memref.store %[[R]], %[[ORDER]][%{{.*}}]
// CHECK:   arith.cmpi ule
// CHECK:   memref.store %{{.*}}, %[[TILES]][%{{.*}}]
// CHECK:   gpu.barrier
// CHECK:   scf.for %[[ROUTE:.*]] = %[[LO]] to %[[HI]] step %c1 {
// CHECK:     %[[RANK:.*]] = memref.load %[[SCRATCH]][%[[EX:.*]], %[[T]]]
// CHECK:     %[[START:.*]] = memref.load %[[SEG]][%[[EX]]]
// CHECK:     %[[SLOT:.*]] = arith.addi %[[START]], %[[RANK]]
// CHECK:     memref.store %[[SLOT]], %[[SLOTS]]
// CHECK:     memref.store %[[ROUTE]], %[[ORDER]][%[[SLOT]]]
// CHECK:   gpu.terminator
// CHECK: gpu.dealloc  %[[SCRATCH]]
// SMALL: gpu.alloc {{.*}} : memref<?x128xindex>
func.func @sort(%i: memref<?x2x3xi32>, %seg: memref<11xindex>, %order: memref<?xindex>, %slots: memref<?x2x3xindex>, %tiles: memref<?xindex>) {
  moe.sort_routes ins(%i : memref<?x2x3xi32>) outs(%seg, %order, %slots, %tiles : memref<11xindex>, memref<?xindex>, memref<?x2x3xindex>, memref<?xindex>) experts_per_head(5) tile_size(64)
  return
}

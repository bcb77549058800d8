// RUN: switchyard-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(switchyard-gpu-launch-to-host-loops))" --verify-diagnostics | FileCheck %s

// A kernel with a 2-D grid: six loops (z, y, x blocks, then z, y, x
// threads) around its body, whose ids and sizes become the loops' induction
// variables and bounds; gpu.block_dim inside the body reads the block size.
// Device allocations, copies and frees become host ones.
// CHECK-LABEL: func.func @grid
// CHECK-SAME: (%[[N:.*]]: index, %[[SRC:.*]]: memref<?xf32>)
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[BUF:.*]] = memref.alloc(%[[N]]) {alignment = 64 : i64} : memref<?xf32>
// CHECK: memref.copy %[[SRC]], %[[BUF]]
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: scf.for %[[BZ:.*]] = %[[C0]] to %[[C1]] step
// CHECK:   scf.for %[[BY:.*]] = %[[C0]] to %[[C2]] step
// CHECK:     scf.for %[[BX:.*]] = %[[C0]] to %[[N]] step
// CHECK:       scf.for %[[TZ:.*]] = %[[C0]] to %[[C1]] step
// CHECK:         scf.for %[[TY:.*]] = %[[C0]] to %[[C1]] step
// CHECK:           scf.for %[[TX:.*]] = %[[C0]] to %[[C4]] step
// CHECK:             %[[ROW:.*]] = arith.muli %[[BY]], %[[N]]
// CHECK:             %[[I:.*]] = arith.addi %[[ROW]], %[[BX]]
// CHECK:             %[[J:.*]] = arith.muli %[[I]], %[[C4]]
// CHECK:             %[[K:.*]] = arith.addi %[[J]], %[[TX]]
// CHECK:             memref.store %{{.*}}, %[[BUF]][%[[K]]]
// CHECK-NOT: gpu.
// CHECK: memref.dealloc %[[BUF]]
func.func @grid(%n: index, %src: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %cst = arith.constant 1.0 : f32
  %buf = gpu.alloc (%n) : memref<?xf32>
  gpu.memcpy %buf, %src : memref<?xf32>, memref<?xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c2, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %row = arith.muli %by, %gx : index
    %i = arith.addi %row, %bx : index
    %width = gpu.block_dim x
    %j = arith.muli %i, %width : index
    %k = arith.addi %j, %tx : index
    memref.store %cst, %buf[%k] : memref<?xf32>
    gpu.terminator
  }
  gpu.dealloc %buf : memref<?xf32>
  return
}

// -----

// Threads that wait for each other cannot run one after another.
func.func @barrier(%buf: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    // expected-error @below {{'gpu.barrier' op in a kernel: this op depends on the GPU; the GPU emulation runs the SIMT route only}}
    gpu.barrier
    gpu.terminator
  }
  return
}

// -----

// Host code holds device pointers on the GPU target: reading one there is
// the bug that switchyard-gpu-launch-host-compute exists to prevent.
func.func @host_load(%loss: memref<f32>) -> f32 {
  // expected-error @below {{'memref.load' op reads or writes a buffer in host code, which holds device pointers on the GPU target}}
  %l = memref.load %loss[] : memref<f32>
  return %l : f32
}

// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-merge-launches))" --split-input-file | FileCheck %s
// With a parameter budget that one kernel's descriptors fill, nothing merges.
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-merge-launches{max-parameter-bytes=128}))" --split-input-file | FileCheck %s --check-prefix=BUDGET
// BUDGET-LABEL: func.func @independent
// BUDGET-COUNT-2: gpu.launch blocks
// BUDGET-NOT: scf.if

// Two independent kernels of 256 threads (each reads an argument and writes
// a buffer of its own) become one launch over both grids; each block runs
// the body its index falls in, with its own block index.
// CHECK-LABEL: func.func @independent
// CHECK-SAME: (%[[A:.*]]: memref<?xf32>, %[[B:.*]]: memref<?xf32>, %[[N0:.*]]: index, %[[N1:.*]]: index)
// CHECK: %[[P:.*]] = gpu.alloc
// CHECK: %[[Q:.*]] = gpu.alloc
// CHECK: %[[END0:.*]] = arith.addi %c0
// CHECK: %[[TOTAL:.*]] = arith.addi %[[END0]]
// CHECK: gpu.launch blocks(%[[ID:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[TOTAL]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads
// CHECK: %[[FIRST:.*]] = arith.cmpi ult, %[[ID]], %[[END0]] : index
// CHECK: scf.if %[[FIRST]] {
// CHECK: memref.load %[[A]]
// CHECK: memref.store {{.*}}, %[[P]]
// CHECK: } else {
// CHECK: %[[LOCAL:.*]] = arith.subi %[[ID]], %[[END0]] : index
// CHECK: arith.remui %[[LOCAL]], %[[N1]]
// CHECK: memref.load %[[B]]
// CHECK: memref.store {{.*}}, %[[Q]]
// CHECK: }
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
func.func @independent(%a: memref<?xf32>, %b: memref<?xf32>, %n0: index, %n1: index) -> (memref<256xf32>, memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %p = gpu.alloc () : memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n0, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %a[%bx] : memref<?xf32>
    memref.store %v, %p[%tx] : memref<256xf32>
    gpu.terminator
  }
  %q = gpu.alloc () : memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %b[%bx] : memref<?xf32>
    memref.store %v, %q[%tx] : memref<256xf32>
    gpu.terminator
  }
  return %p, %q : memref<256xf32>, memref<256xf32>
}

// -----

// Left apart: a kernel that reads what the one before wrote, kernels of
// different block sizes, two kernels that write function arguments (which
// may be the same memory), and a kernel with a barrier.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-6: gpu.launch
// CHECK-NOT: scf.if
func.func @kept(%a: memref<256xf32>, %b: memref<256xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %p = gpu.alloc () : memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %a[%tx] : memref<256xf32>
    memref.store %v, %p[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %p[%tx] : memref<256xf32>
    memref.store %v, %b[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %v = memref.load %p[%tx] : memref<256xf32>
    memref.store %v, %a[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %p[%tx] : memref<256xf32>
    memref.store %v, %b[%tx] : memref<256xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %p[%tx] : memref<256xf32>
    memref.store %v, %a[%tx] : memref<256xf32>
    gpu.barrier
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %p[%tx] : memref<256xf32>
    memref.store %v, %b[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}

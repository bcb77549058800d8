// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-merge-launches))" --split-input-file | FileCheck %s
// With a parameter budget that one kernel's descriptors fill, nothing merges.
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-merge-launches{max-parameter-bytes=128}))" --split-input-file | FileCheck %s --check-prefix=BUDGET
// Without reordering (window=0), the chains below stay four launches.
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-merge-launches{window=0}))" --split-input-file | FileCheck %s --check-prefix=WINDOW
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
// different block sizes, and two kernels that write function arguments
// (which may be the same memory; one of them with a barrier).
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

// -----

// Two chains, each a 256-thread kernel then a single-thread kernel that
// reads its result, then frees the temporary: the independent launches are
// brought together (a list schedule of their dependences) and merged, the
// partial results' kernels first, then the final ones; each free follows
// the kernel that last reads its buffer. With window=0 nothing moves and
// nothing merges (each kernel depends on the one before or a free stands
// between).
// CHECK-LABEL: func.func @chains
// CHECK: gpu.launch
// CHECK: scf.if
// CHECK: memref.store {{.*}}, %[[T0:[a-z_0-9]+]][
// CHECK: } else {
// CHECK: memref.store {{.*}}, %[[T1:[a-z_0-9]+]][
// CHECK: gpu.launch
// CHECK: scf.if
// CHECK: memref.load %[[T0]]
// CHECK: } else {
// CHECK: memref.load %[[T1]]
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: gpu.dealloc %[[T0]]
// CHECK-NEXT: gpu.dealloc %[[T1]]
// CHECK-NOT: gpu.launch
// WINDOW-LABEL: func.func @chains
// WINDOW-COUNT-4: gpu.launch blocks
// WINDOW-NOT: scf.if
func.func @chains(%a: memref<256xf32>, %b: memref<256xf32>, %n: index) -> (memref<f32>, memref<f32>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %t0 = gpu.alloc () : memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %a[%tx] : memref<256xf32>
    memref.store %v, %t0[%tx] : memref<256xf32>
    gpu.terminator
  }
  %r0 = gpu.alloc () : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %t0[%tx] : memref<256xf32>
    memref.store %v, %r0[] : memref<f32>
    gpu.terminator
  }
  gpu.dealloc %t0 : memref<256xf32>
  %t1 = gpu.alloc () : memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %b[%tx] : memref<256xf32>
    memref.store %v, %t1[%tx] : memref<256xf32>
    gpu.terminator
  }
  %r1 = gpu.alloc () : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %t1[%tx] : memref<256xf32>
    memref.store %v, %r1[] : memref<f32>
    gpu.terminator
  }
  gpu.dealloc %t1 : memref<256xf32>
  return %r0, %r1 : memref<f32>, memref<f32>
}

// -----

// Kernels with barriers and dynamic shared memory (the tensor-core
// kernels) merge where their shared memory is the same, or small (up to
// 4 KiB): every thread of a block takes the same branch, barriers
// included. The merged launch takes the largest size; a kernel that needs
// more than 4 KiB, and not the same, stays apart.
// CHECK-LABEL: func.func @shared_memory
// CHECK: %[[LARGEST:.*]] = arith.constant 2048 : i32
// CHECK: gpu.launch blocks(%{{.*}}) in (%{{.*}}) threads(%{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) dynamic_shared_memory_size %[[LARGEST]]
// CHECK: scf.if
// CHECK: gpu.barrier
// CHECK: } else {
// CHECK: gpu.barrier
// CHECK: } {switchyard.merged}
// CHECK: gpu.launch blocks(%{{.*}}) in (%{{.*}}) threads(%{{.*}}) in (%{{.*}}) dynamic_shared_memory_size %c8192_i32
// CHECK-NOT: scf.if
// CHECK: return
// Adjacent, they merge without reordering too.
// WINDOW-LABEL: func.func @shared_memory
// WINDOW: } {switchyard.merged}
func.func @shared_memory(%a: memref<128xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c1024_i32 = arith.constant 1024 : i32
  %c2048_i32 = arith.constant 2048 : i32
  %c8192_i32 = arith.constant 8192 : i32
  %p = gpu.alloc () : memref<128xf32>
  %q = gpu.alloc () : memref<128xf32>
  %r = gpu.alloc () : memref<128xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) dynamic_shared_memory_size %c1024_i32 {
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %tile = memref.view %smem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128xf32, #gpu.address_space<workgroup>>
    %v = memref.load %a[%tx] : memref<128xf32>
    memref.store %v, %tile[%tx] : memref<128xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %w = memref.load %tile[%tx] : memref<128xf32, #gpu.address_space<workgroup>>
    memref.store %w, %p[%tx] : memref<128xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) dynamic_shared_memory_size %c2048_i32 {
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %tile = memref.view %smem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128xf32, #gpu.address_space<workgroup>>
    %v = memref.load %a[%tx] : memref<128xf32>
    memref.store %v, %tile[%tx] : memref<128xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %w = memref.load %tile[%tx] : memref<128xf32, #gpu.address_space<workgroup>>
    memref.store %w, %q[%tx] : memref<128xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) dynamic_shared_memory_size %c8192_i32 {
    %smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %tile = memref.view %smem[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128xf32, #gpu.address_space<workgroup>>
    %v = memref.load %a[%tx] : memref<128xf32>
    memref.store %v, %tile[%tx] : memref<128xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %w = memref.load %tile[%tx] : memref<128xf32, #gpu.address_space<workgroup>>
    memref.store %w, %r[%tx] : memref<128xf32>
    gpu.terminator
  }
  return
}

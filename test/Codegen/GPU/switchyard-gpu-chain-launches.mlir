// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-chain-launches))" --split-input-file | FileCheck %s
// With no tail steps allowed, nothing chains.
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-chain-launches{max-tail-blocks=0}))" --split-input-file | FileCheck %s --check-prefix=NONE
// NONE-LABEL: func.func @combine
// NONE-COUNT-3: gpu.launch blocks
// NONE-NOT: switchyard.last_block
// Nor within a parameter budget that one launch's descriptors fill.
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-chain-launches{max-parameter-bytes=100}))" --split-input-file | FileCheck %s --check-prefix=BUDGET
// BUDGET-LABEL: func.func @combine
// BUDGET-COUNT-3: gpu.launch blocks
// BUDGET-NOT: switchyard.last_block
// A tail of at most 3 steps takes the first of two 2-block launches only.
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-chain-launches{max-tail-blocks=3}))" --split-input-file | FileCheck %s --check-prefix=STEPS
// STEPS-LABEL: func.func @two_tails
// STEPS: gpu.launch
// STEPS: } {switchyard.last_block, switchyard.tail_steps = 2 : i64}
// STEPS: gpu.launch
// STEPS-NOT: switchyard.last_block

// A partial sum over %n blocks, then its combination in 4 blocks of the
// same shape with a barrier (threads that cooperate): the combination runs
// in the block of the partial sum that counts itself last, its 4 blocks one
// after another, a barrier after each. The counter is a fresh i32 that the
// first thread of the launch before the two zeroes; a free between the two
// moves after the result.
// CHECK-LABEL: func.func @combine
// CHECK-SAME: (%[[X:.*]]: memref<?xf32>, %[[N:.*]]: index)
// CHECK: %[[COUNTER:.*]] = gpu.alloc () : memref<1xi32>
// CHECK: gpu.launch blocks(%[[ZX:.*]], %[[ZY:.*]], %[[ZZ:.*]]) in {{.*}} threads(%[[ZTX:.*]], %[[ZTY:.*]], %[[ZTZ:.*]]) in
// CHECK: arith.cmpi eq, %[[ZX]], %c0
// CHECK: arith.cmpi eq, %[[ZTZ]], %c0
// CHECK: %[[ZFIRST:.*]] = arith.andi
// CHECK-NEXT: scf.if %[[ZFIRST]] {
// CHECK: memref.store %{{.*}}, %[[COUNTER]][%{{.*}}] : memref<1xi32>
// CHECK: memref.store {{.*}} : memref<256xf32>
// CHECK: gpu.terminator
// CHECK: %[[PARTIAL:.*]] = gpu.alloc (%[[N]]) : memref<?x256xf32>
// CHECK: %[[OUT:.*]] = gpu.alloc () : memref<1024xf32>
// CHECK: %[[UNUSED:.*]] = gpu.alloc () : memref<4xf32>
// CHECK-NOT: gpu.dealloc
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%[[GX:.*]] = %[[N]], %[[GY:.*]] = %c1{{.*}}, %[[GZ:.*]] = %c1{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in {{.*}} dynamic_shared_memory_size %c1024_i32
// CHECK: memref.store {{.*}}, %[[PARTIAL]]
// CHECK: %[[GYZ:.*]] = arith.muli %[[GY]], %[[GZ]]
// CHECK: %[[BLOCKS:.*]] = arith.muli %[[GX]], %[[GYZ]]
// CHECK: %[[LASTINDEX:.*]] = arith.subi %[[BLOCKS]], %c1
// CHECK: %[[LASTCOUNT:.*]] = arith.index_cast %[[LASTINDEX]] : index to i32
// CHECK: %[[SHARED:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[FLAG:.*]] = memref.view %[[SHARED]]
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-NEXT: nvvm.memory.barrier <gpu>
// CHECK: %[[COUNTED:.*]] = memref.atomic_rmw addi %{{.*}}, %[[COUNTER]][%{{.*}}] : (i32, memref<1xi32>) -> i32
// CHECK-NEXT: nvvm.memory.barrier <gpu>
// CHECK: arith.cmpi eq, %[[COUNTED]], %[[LASTCOUNT]] : i32
// CHECK: memref.store %{{.*}}, %[[FLAG]]
// CHECK: gpu.barrier
// CHECK: %[[READ:.*]] = memref.load %[[FLAG]][%{{.*}}] {switchyard.block_uniform}
// CHECK-NEXT: gpu.barrier
// CHECK: %[[LAST:.*]] = arith.cmpi ne, %[[READ]]
// CHECK: scf.if %[[LAST]] {
// CHECK-NEXT: nvvm.memory.barrier <gpu>
// CHECK: scf.for %[[B:.*]] = %{{.*}} to %c4{{.*}} step
// CHECK: %[[BX:.*]] = arith.remui %[[B]], %c4
// CHECK: gpu.dynamic_shared_memory
// CHECK: memref.load %[[PARTIAL]]
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[OUT]]
// CHECK: gpu.barrier
// CHECK-NEXT: }
// CHECK-NEXT: } {switchyard.last_block, switchyard.tail_steps = 4 : i64}
// CHECK-NEXT: gpu.terminator
// CHECK: gpu.dealloc %[[UNUSED]]
// CHECK: gpu.dealloc %[[COUNTER]]
// CHECK: gpu.dealloc %[[PARTIAL]]
// CHECK-NOT: gpu.launch
func.func @combine(%x: memref<?xf32>, %n: index) -> (memref<256xf32>, memref<1024xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c256 = arith.constant 256 : index
  %c1024_i32 = arith.constant 1024 : i32
  %first = gpu.alloc () : memref<256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<?xf32>
    memref.store %v, %first[%tx] : memref<256xf32>
    gpu.terminator
  }
  %partial = gpu.alloc (%n) : memref<?x256xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%bx] : memref<?xf32>
    memref.store %v, %partial[%bx, %tx] : memref<?x256xf32>
    gpu.terminator
  }
  %out = gpu.alloc () : memref<1024xf32>
  %unused = gpu.alloc () : memref<4xf32>
  gpu.dealloc %unused : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) dynamic_shared_memory_size %c1024_i32 {
    %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %c0 = arith.constant 0 : index
    %sums = memref.view %shared[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xf32, #gpu.address_space<workgroup>>
    %v = memref.load %partial[%c0, %tx] : memref<?x256xf32>
    memref.store %v, %sums[%tx] : memref<256xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %w = memref.load %sums[%c0] : memref<256xf32, #gpu.address_space<workgroup>>
    %i = arith.muli %bx, %c256 : index
    %j = arith.addi %i, %tx : index
    memref.store %w, %out[%j] : memref<1024xf32>
    gpu.terminator
  }
  gpu.dealloc %partial : memref<?x256xf32>
  return %first, %out : memref<256xf32>, memref<1024xf32>
}

// -----

// A single-thread kernel (its thread works on its own) after the first
// launch of the function: the block's threads run its one thread, each
// thread every 256th from its own index; a memset zeroes the counter (no
// launch before the first); the launch gets the 4 bytes of the flag.
// CHECK-LABEL: func.func @single_thread
// CHECK: %[[COUNTER:.*]] = gpu.alloc () : memref<1xi32>
// CHECK: gpu.memset %[[COUNTER]], %{{.*}} : memref<1xi32>, i32
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}}) threads(%[[TX:.*]], %[[TY:.*]], %[[TZ:.*]]) in (%[[SX:.*]] = {{.*}}, %[[SY:.*]] = {{.*}}, %[[SZ:.*]] = {{.*}}) dynamic_shared_memory_size %c4_i32
// CHECK: scf.if %{{.*}} {
// CHECK-NEXT: nvvm.memory.barrier <gpu>
// CHECK: %[[TID:.*]] = arith.addi %[[TX]]
// CHECK: %[[STRIDE:.*]] = arith.muli %[[SX]]
// CHECK: scf.for %{{.*}} = %[[TID]] to %c1{{.*}} step %[[STRIDE]] {
// CHECK: memref.load
// CHECK: memref.store
// CHECK: } {switchyard.last_block, switchyard.tail_steps = 1 : i64}
// CHECK-NOT: gpu.launch
func.func @single_thread(%x: memref<?xf32>, %n: index) -> memref<f32> {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %sums = gpu.alloc (%n) : memref<?xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%bx] : memref<?xf32>
    memref.store %v, %sums[%bx] : memref<?xf32>
    gpu.terminator
  }
  %out = gpu.alloc () : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %c0 = arith.constant 0 : index
    %v = memref.load %sums[%c0] : memref<?xf32>
    memref.store %v, %out[] : memref<f32>
    gpu.terminator
  }
  return %out : memref<f32>
}

// -----

// Two small launches after a large one share its tail, a barrier between
// them; one counter.
// CHECK-LABEL: func.func @two_tails
// CHECK: gpu.alloc () : memref<1xi32>
// CHECK-NOT: gpu.alloc () : memref<1xi32>
// CHECK: gpu.launch
// CHECK: memref.atomic_rmw
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[OUT1:.*]][%{{.*}}] : memref<512xf32>
// CHECK: gpu.barrier
// CHECK: memref.load %[[OUT1]]
// CHECK: memref.store %{{.*}} : memref<512xf32>
// CHECK: } {switchyard.last_block, switchyard.tail_steps = 4 : i64}
// CHECK-NOT: gpu.launch
func.func @two_tails(%x: memref<?xf32>, %n: index) -> memref<512xf32> {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c256 = arith.constant 256 : index
  %sums = gpu.alloc (%n) : memref<?xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%bx] : memref<?xf32>
    memref.store %v, %sums[%bx] : memref<?xf32>
    gpu.terminator
  }
  %a = gpu.alloc () : memref<512xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %sums[%tx] : memref<?xf32>
    %i = arith.muli %bx, %c256 : index
    %j = arith.addi %i, %tx : index
    memref.store %v, %a[%j] : memref<512xf32>
    gpu.terminator
  }
  %b = gpu.alloc () : memref<512xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %i = arith.muli %bx, %c256 : index
    %j = arith.addi %i, %tx : index
    %v = memref.load %a[%j] : memref<512xf32>
    memref.store %v, %b[%j] : memref<512xf32>
    gpu.terminator
  }
  return %b : memref<512xf32>
}

// -----

// Left apart: a small launch whose grid is not known when compiling, one
// of more blocks than max-tail-blocks, one that cooperates (a barrier) in
// blocks of another shape, and one that asks for its block index with
// gpu.block_id (a tail could not answer it).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: gpu.launch blocks
// CHECK-NOT: switchyard.last_block
func.func @kept(%x: memref<?xf32>, %n: index, %m: index) {
  %c1 = arith.constant 1 : index
  %c9 = arith.constant 9 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%bx] : memref<?xf32>
    memref.store %v, %x[%tx] : memref<?xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %m, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%bx] : memref<?xf32>
    memref.store %v, %x[%tx] : memref<?xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c9, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%bx] : memref<?xf32>
    memref.store %v, %x[%tx] : memref<?xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<?xf32>
    gpu.barrier
    memref.store %v, %x[%bx] : memref<?xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %id = gpu.block_id x
    %v = memref.load %x[%id] : memref<?xf32>
    memref.store %v, %x[%tx] : memref<?xf32>
    gpu.terminator
  }
  return
}

// RUN: switchyard-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(switchyard-gpu-launch-host-compute))" --verify-diagnostics | FileCheck %s

// A host scalar chain (a loss read back, its square root) and a
// reduction-only loop nest run in one single-thread kernel; the scalar
// reaches the later kernel through a 0-d device buffer, loaded at its start.
// The host keeps its shape computations.
// CHECK-LABEL: func.func @scalars
// CHECK-SAME: (%[[LOSS:.*]]: memref<f32>, %[[X:.*]]: memref<?xf32>, %[[SUM:.*]]: memref<f32>)
// CHECK: %[[N:.*]] = memref.dim %[[X]]
// CHECK: %[[ONE:.*]] = arith.constant 1 : index
// CHECK: %[[BUF:.*]] = gpu.alloc () : memref<f32>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[ONE]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]]) threads({{.*}}) in ({{.*}} = %[[ONE]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]]) {
// CHECK:   %[[L:.*]] = memref.load %[[LOSS]][]
// CHECK:   %[[R:.*]] = math.sqrt %[[L]]
// CHECK:   scf.for %{{.*}} = %{{.*}} to %[[N]]
// CHECK:     memref.store %{{.*}}, %[[SUM]][]
// CHECK:   memref.store %[[R]], %[[BUF]][]
// CHECK:   gpu.terminator
// CHECK: gpu.launch
// CHECK:   %[[R2:.*]] = memref.load %[[BUF]][]
// CHECK:   memref.store %[[R2]], %[[X]]
// CHECK: gpu.dealloc %[[BUF]] : memref<f32>
// CHECK-NEXT: return
func.func @scalars(%loss: memref<f32>, %x: memref<?xf32>, %sum: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %l = memref.load %loss[] : memref<f32>
  %r = math.sqrt %l : f32
  %n = memref.dim %x, %c0 : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xf32>
    %s = memref.load %sum[] : memref<f32>
    %t = arith.addf %s, %v : f32
    memref.store %t, %sum[] : memref<f32>
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %r, %x[%bx] : memref<?xf32>
    gpu.terminator
  }
  return
}

// -----

// A launch in between keeps the memory order: two kernels around it.
// CHECK-LABEL: func.func @order
// CHECK: gpu.launch
// CHECK:   memref.store %{{.*}}, %[[A:.*]][]
// CHECK: gpu.launch
// CHECK:   memref.store %{{.*}}, %{{.*}}[%{{.*}}]
// CHECK: gpu.launch
// CHECK:   memref.load %[[A]][]
func.func @order(%a: memref<f32>, %x: memref<4xf32>, %b: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 2.0 : f32
  memref.store %f, %a[] : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %f, %x[%c0] : memref<4xf32>
    gpu.terminator
  }
  %v = memref.load %a[] : memref<f32>
  memref.store %v, %b[] : memref<f32>
  return
}

// -----

// The host cannot size an allocation with a value only the device can read.
func.func @device_size(%n: memref<index>) {
  %s = memref.load %n[] : memref<index>
  // expected-error @below {{'gpu.alloc' op runs on the host but needs a value that only the device can compute or read (buffers live in device memory)}}
  %b = gpu.alloc (%s) : memref<?xf32>
  return
}

// -----

// Parallel loops must have become launches first.
func.func @unmapped(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 0.0 : f32
  // expected-error @below {{'scf.parallel' op was not mapped to blocks and threads; run convert-parallel-loops-to-gpu first}}
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %f, %x[%i] : memref<4xf32>
  }
  return
}

// -----

// A call of a function of the module only passes buffers on (the callee's
// own memory accesses become its kernels): it stays on the host. A call of
// a declaration, whose accesses are unknown, cannot.
// CHECK-LABEL: func.func @caller(
// CHECK-NEXT: call @callee(%{{.*}}) : (memref<4xf32>) -> memref<4xf32>
// CHECK-NEXT: return
func.func @callee(%x: memref<4xf32>) -> memref<4xf32> {
  return %x : memref<4xf32>
}
func.func @caller(%x: memref<4xf32>) -> memref<4xf32> {
  %y = call @callee(%x) : (memref<4xf32>) -> memref<4xf32>
  return %y : memref<4xf32>
}

// -----

func.func private @opaque(memref<4xf32>)
func.func @declared(%x: memref<4xf32>) {
  // expected-error @below {{'func.call' op runs on the host but needs a value that only the device can compute or read (buffers live in device memory)}}
  call @opaque(%x) : (memref<4xf32>) -> ()
  return
}

// -----

// A scalar read that only kernels use, with its arithmetic (a dropout key
// from its seed), is computed again in each kernel that uses it, in program
// order, rather than in a single-thread kernel of its own: no op between
// the read and the kernels writes the seed's buffer (a fresh allocation
// cannot be it).
// CHECK-LABEL: func.func @recomputed
// CHECK-SAME: (%[[SEED:.*]]: memref<i64>, %[[OUT:.*]]: memref<256xi64>)
// CHECK-NOT: memref.load
// CHECK: gpu.launch
// CHECK-NEXT: %[[S:.*]] = memref.load %[[SEED]][]
// CHECK-NEXT: %[[A:.*]] = arith.addi %[[S]], %{{.*}}
// CHECK-NEXT: %[[B:.*]] = arith.shrui %[[A]], %{{.*}}
// CHECK-NEXT: arith.xori %[[A]], %[[B]]
// CHECK: gpu.launch
// CHECK-NEXT: memref.load %[[SEED]][]
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @recomputed(%seed: memref<i64>, %out: memref<256xi64>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %k = arith.constant 7 : i64
  %s = memref.load %seed[] : memref<i64>
  %a = arith.addi %s, %k : i64
  %b = arith.shrui %a, %k : i64
  %key = arith.xori %a, %b : i64
  %tmp = gpu.alloc () : memref<256xi64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %i = arith.index_cast %tx : index to i64
    %v = arith.addi %key, %i : i64
    memref.store %v, %tmp[%tx] : memref<256xi64>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %t = memref.load %tmp[%tx] : memref<256xi64>
    %v = arith.xori %key, %t : i64
    memref.store %v, %out[%tx] : memref<256xi64>
    gpu.terminator
  }
  gpu.dealloc %tmp : memref<256xi64>
  return
}

// -----

// A kernel in between that writes its shared memory (a row kernel's
// partial sums) does not write the seed's buffer: the read is still
// computed again in the kernel that uses it.
// CHECK-LABEL: func.func @past_shared_memory
// CHECK-SAME: (%[[SEED:.*]]: memref<i64>, %[[OUT:.*]]: memref<256xi64>)
// CHECK-NOT: memref.load
// CHECK: gpu.launch
// CHECK: gpu.dynamic_shared_memory
// CHECK-NOT: memref.load %[[SEED]]
// CHECK: gpu.launch
// CHECK-NEXT: memref.load %[[SEED]][]
func.func @past_shared_memory(%seed: memref<i64>, %out: memref<256xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c2048 = arith.constant 2048 : i32
  %k = arith.constant 7 : i64
  %s = memref.load %seed[] : memref<i64>
  %key = arith.addi %s, %k : i64
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) dynamic_shared_memory_size %c2048 {
    %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %view = memref.view %shared[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xi64, #gpu.address_space<workgroup>>
    memref.store %k, %view[%tx] : memref<256xi64, #gpu.address_space<workgroup>>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %key, %out[%tx] : memref<256xi64>
    gpu.terminator
  }
  return
}

// -----

// A kernel in between may write the buffer read (two function arguments
// may be one buffer): the read runs once, in a kernel of its own before it.
// CHECK-LABEL: func.func @overwritten
// CHECK: gpu.launch
// CHECK:   memref.load %{{.*}}[] : memref<i64>
// CHECK:   memref.store %{{.*}}, %{{.*}}[] : memref<i64>
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK:   memref.load %{{.*}}[] : memref<i64>
func.func @overwritten(%seed: memref<i64>, %other: memref<i64>, %out: memref<256xi64>) {
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %k = arith.constant 7 : i64
  %s = memref.load %seed[] : memref<i64>
  %key = arith.addi %s, %k : i64
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %k, %other[] : memref<i64>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    memref.store %key, %out[%tx] : memref<256xi64>
    gpu.terminator
  }
  return
}

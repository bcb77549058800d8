// RUN: switchyard-opt %s -split-input-file --switchyard-gpu-register-accumulators | FileCheck %s

// One thread of a bias gradient over a [?, 256, 412] buffer: the inner
// reduction loop carries db[col], then the outer one does.
// CHECK-LABEL: func.func @bias_gradient(
// CHECK: gpu.launch
// CHECK: %[[COL:.*]] = affine.apply
// The outer loop's trip count (the batch) may be 0: the load before it and
// the store after it only where it runs. The inner one's (256) is not.
// CHECK: %[[RUNS:.*]] = arith.cmpi slt, %{{.*}}, %[[N:.*]] : index
// CHECK-NEXT: %[[INIT:.*]] = scf.if %[[RUNS]] -> (f32) {
// CHECK-NEXT: %[[OLD:.*]] = memref.load %[[DB:.*]][%[[COL]]] : memref<412xf32>
// CHECK-NEXT: scf.yield %[[OLD]] : f32
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: scf.yield %[[ZERO]] : f32
// CHECK: %[[OUTER:.*]] = scf.for %{{.*}} = %{{.*}} to %[[N]] step %{{.*}} iter_args(%[[ACC0:.*]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT: %[[INNER:.*]] = scf.for %[[S:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[ACC0]]) -> (f32) {
// CHECK-NEXT: %[[X:.*]] = memref.load %{{.*}}[%{{.*}}, %[[S]], %[[COL]]] : memref<?x256x412xf32>
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[ACC]], %[[X]] : f32
// CHECK-NEXT: scf.yield %[[SUM]] : f32
// CHECK: scf.yield %[[INNER]] : f32
// CHECK: scf.if %[[RUNS]] {
// CHECK-NEXT: memref.store %[[OUTER]], %[[DB]][%[[COL]]] : memref<412xf32>
// CHECK-NOT: memref.store
// CHECK: gpu.terminator
func.func @bias_gradient(%dy: memref<?x256x412xf32>) -> memref<412xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c256 = arith.constant 256 : index
  %c412 = arith.constant 412 : index
  %n = memref.dim %dy, %c0 : memref<?x256x412xf32>
  %db = gpu.alloc () : memref<412xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %col = affine.apply affine_map<(d0, d1) -> (d0 * 256 + d1)>(%bx, %tx)
    %in = arith.cmpi ult, %col, %c412 : index
    scf.if %in {
      scf.for %b = %c0 to %n step %c1 {
        scf.for %s = %c0 to %c256 step %c1 {
          %x = memref.load %dy[%b, %s, %col] : memref<?x256x412xf32>
          %acc = memref.load %db[%col] : memref<412xf32>
          %sum = arith.addf %acc, %x : f32
          memref.store %sum, %db[%col] : memref<412xf32>
        }
      }
    }
    gpu.terminator
  }
  return %db : memref<412xf32>
}

// -----

// Left alone: the output is a function argument (it may alias the input);
// the loop also reads the output buffer elsewhere (through a view); the
// indices change in the loop; the store is under a branch; a loop with a
// barrier; the element is read through a view made in the loop (another
// element each iteration); a loop outside any kernel.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT: iter_args
// CHECK: return
func.func @left_alone(%x: memref<64xf32>, %arg_out: memref<f32>, %flag: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %out = gpu.alloc () : memref<64xf32>
  %view = memref.subview %out[0] [32] [1] : memref<64xf32> to memref<32xf32, strided<[1]>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %i = %c0 to %c64 step %c1 {
      %a = memref.load %x[%i] : memref<64xf32>
      %o = memref.load %arg_out[] : memref<f32>
      %s = arith.addf %o, %a : f32
      memref.store %s, %arg_out[] : memref<f32>
    }
    scf.for %i = %c0 to %c64 step %c1 {
      %a = memref.load %view[%c1] : memref<32xf32, strided<[1]>>
      %o = memref.load %out[%c0] : memref<64xf32>
      %s = arith.addf %o, %a : f32
      memref.store %s, %out[%c0] : memref<64xf32>
    }
    scf.for %i = %c0 to %c64 step %c1 {
      %o = memref.load %out[%i] : memref<64xf32>
      %s = arith.addf %o, %o : f32
      memref.store %s, %out[%i] : memref<64xf32>
    }
    scf.for %i = %c0 to %c64 step %c1 {
      %o = memref.load %out[%c0] : memref<64xf32>
      scf.if %flag {
        memref.store %o, %out[%c0] : memref<64xf32>
      }
    }
    scf.for %i = %c0 to %c64 step %c1 {
      %o = memref.load %out[%c0] : memref<64xf32>
      gpu.barrier
      memref.store %o, %out[%c0] : memref<64xf32>
    }
    scf.for %i = %c0 to %c64 step %c1 {
      %row = memref.subview %out[%i] [1] [1] : memref<64xf32> to memref<1xf32, strided<[1], offset: ?>>
      %o = memref.load %row[%c0] : memref<1xf32, strided<[1], offset: ?>>
      %s = arith.addf %o, %o : f32
      memref.store %s, %row[%c0] : memref<1xf32, strided<[1], offset: ?>>
    }
    gpu.terminator
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %o = memref.load %out[%c0] : memref<64xf32>
    %s = arith.addf %o, %o : f32
    memref.store %s, %out[%c0] : memref<64xf32>
  }
  gpu.dealloc %out : memref<64xf32>
  return
}

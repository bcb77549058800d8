// RUN: switchyard-opt %s --switchyard-cpu-forall-to-loops --split-input-file -verify-diagnostics | FileCheck %s

// A bufferized forall over 2 dimensions: two nested loops, the outer one
// marked parallel; a forall nested in it becomes loops too, its outermost
// marked as well (switchyard-cpu-outline-loops only uses the top level's).
// CHECK-LABEL: func.func @nested
// CHECK-NOT: scf.forall
// CHECK: scf.for %[[I:[a-z0-9_]+]] = %c0 to %c4 step %c1 {
// CHECK:   scf.for %[[J:[a-z0-9_]+]] = %{{.*}} to %arg1 step %{{.*}} {
// CHECK:     scf.for %[[K:[a-z0-9_]+]] = %{{.*}} to %c3 step %{{.*}} {
// CHECK:       memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]], %[[K]]]
// CHECK:     } {switchyard.parallel}
// CHECK:   }
// CHECK: } {switchyard.parallel}
func.func @nested(%out: memref<4x?x3xf32>, %n: index, %v: f32) {
  scf.forall (%i, %j) in (4, %n) {
    scf.forall (%k) in (3) {
      memref.store %v, %out[%i, %j, %k] : memref<4x?x3xf32>
    }
  }
  return
}

// -----

// A forall on tensors has not been bufferized.
func.func @tensors(%t: tensor<4xf32>, %v: f32) -> tensor<4xf32> {
  // expected-error @+1 {{expected a bufferized scf.forall (no results)}}
  %r = scf.forall (%i) in (4) shared_outs(%o = %t) -> (tensor<4xf32>) {
    %s = tensor.from_elements %v : tensor<1xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[%i] [1] [1] : tensor<1xf32> into tensor<4xf32>
    }
  }
  return %r : tensor<4xf32>
}

// -----

// An iteration's temporaries go on the stack (switchyard-cpu-outline-loops
// moves them to its function's entry); one too large for it, or of a
// dynamic size, stays on the heap.
// CHECK-LABEL: func.func @temporaries
// CHECK: scf.for
// CHECK: %[[T:.*]] = memref.alloca() {alignment = 64 : i64} : memref<f32>
// CHECK: memref.store %{{.*}}, %[[T]][]
// CHECK: memref.alloc() : memref<8192xf32>
// CHECK: memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK-NOT: memref.dealloc %[[T]]
// CHECK: } {switchyard.parallel}
func.func @temporaries(%out: memref<?xf32>, %n: index, %v: f32) {
  scf.forall (%i) in (%n) {
    %t = memref.alloc() {alignment = 64 : i64} : memref<f32>
    memref.store %v, %t[] : memref<f32>
    %big = memref.alloc() : memref<8192xf32>
    %dyn = memref.alloc(%n) : memref<?xf32>
    %w = memref.load %t[] : memref<f32>
    memref.store %w, %out[%i] : memref<?xf32>
    memref.dealloc %t : memref<f32>
    memref.dealloc %big : memref<8192xf32>
    memref.dealloc %dyn : memref<?xf32>
  }
  return
}

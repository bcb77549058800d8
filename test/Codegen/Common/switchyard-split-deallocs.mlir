// RUN: switchyard-opt %s --split-input-file --switchyard-split-deallocs | FileCheck %s

// The results of a call of a function whose results are distinct
// allocations of its own are new allocations: each is freed by a dealloc of
// its own, and a buffer allocated after the call aliases none of them.
// CHECK-LABEL: func.func @step(
// CHECK: %[[G:.*]]:2 = call @grad(
// CHECK: %[[NEW:.*]] = memref.alloc()
// CHECK: bufferization.dealloc (%[[G]]#0 : memref<4xf32>) if (%{{.*}}){{$}}
// CHECK: bufferization.dealloc (%[[G]]#1 : memref<4xf32>) if (%{{.*}}){{$}}
// CHECK: %[[FALSE:.*]] = arith.constant false
// CHECK: return %[[NEW]], %[[FALSE]]
func.func @grad(%x: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<2x2xf32>
  %c = memref.collapse_shape %b [[0, 1]] : memref<2x2xf32> into memref<4xf32>
  return %a, %c : memref<4xf32>, memref<4xf32>
}
func.func @step(%x: memref<4xf32>) -> (memref<4xf32>, i1) {
  %true = arith.constant true
  %g:2 = call @grad(%x) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  %new = memref.alloc() : memref<4xf32>
  %r = bufferization.dealloc (%g#0, %g#1 : memref<4xf32>, memref<4xf32>)
      if (%true, %true) retain (%new : memref<4xf32>)
  return %new, %r : memref<4xf32>, i1
}

// -----

// A function that may return its argument, or the same buffer twice, gives
// no such guarantee: its results stay in one dealloc. A buffer allocated
// after the call is still distinct from both.
// CHECK-LABEL: func.func @step(
// CHECK: bufferization.dealloc (%{{.*}}, %{{.*}} : memref<4xf32>, memref<4xf32>) if (%{{.*}}, %{{.*}}){{$}}
// CHECK: %[[FALSE:.*]] = arith.constant false
// CHECK: return %{{.*}}, %[[FALSE]]
func.func @passes(%x: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  return %a, %x : memref<4xf32>, memref<4xf32>
}
func.func @step(%x: memref<4xf32>) -> (memref<4xf32>, i1) {
  %true = arith.constant true
  %g:2 = call @passes(%x) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  %new = memref.alloc() : memref<4xf32>
  %r = bufferization.dealloc (%g#0, %g#1 : memref<4xf32>, memref<4xf32>)
      if (%true, %true) retain (%new : memref<4xf32>)
  return %new, %r : memref<4xf32>, i1
}

// -----

// A buffer allocated before a call may be what the call returns (the
// callee could get it as an argument): the two are kept together, and the
// allocation is kept retained where it came first. A retained view of the
// dealloc's own allocation stays retained.
// CHECK-LABEL: func.func @before(
// CHECK: %[[A:.*]] = memref.alloc()
// CHECK: %[[R:.*]] = call @opaque(
// CHECK: %{{.*}}:2 = bufferization.dealloc (%[[A]], %[[R]] : memref<4xf32>, memref<4xf32>) if (%{{.*}}, %{{.*}}) retain (%[[A]], %{{.*}} : memref<4xf32>, memref<2x2xf32>)
func.func private @opaque(memref<4xf32>) -> memref<4xf32>
func.func @before(%x: memref<4xf32>) -> (memref<4xf32>, memref<2x2xf32>, i1, i1) {
  %true = arith.constant true
  %a = memref.alloc() : memref<4xf32>
  %r = call @opaque(%a) : (memref<4xf32>) -> memref<4xf32>
  %v = memref.expand_shape %a [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  %o:2 = bufferization.dealloc (%a, %r : memref<4xf32>, memref<4xf32>)
      if (%true, %true) retain (%a, %v : memref<4xf32>, memref<2x2xf32>)
  return %a, %v, %o#0, %o#1 : memref<4xf32>, memref<2x2xf32>, i1, i1
}

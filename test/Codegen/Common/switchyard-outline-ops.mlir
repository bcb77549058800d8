// RUN: switchyard-opt %s --split-input-file --switchyard-outline-ops | FileCheck %s
// RUN: switchyard-opt %s --split-input-file --switchyard-outline-ops --switchyard-inline-outlined-ops | FileCheck %s --check-prefix=BACK
// RUN: switchyard-opt %s --split-input-file --switchyard-outline-ops="fills-with-users" | FileCheck %s --check-prefix=PAIR

// Each kernel-forming op moves into a function of its own, called in its
// place; copies of an op (a model's layers) call one function, in the
// same function or another. Constants are cloned in, buffers and indices
// passed in the order of first use.
// CHECK-LABEL: func.func private @forward_op0(
// CHECK-SAME: %[[X:.*]]: memref<4x8xf32>) attributes {switchyard.outlined_op}
// CHECK: linalg.exp ins(%[[X]] : memref<4x8xf32>) outs(%[[X]] : memref<4x8xf32>)
// CHECK-LABEL: func.func private @forward_op1(
// CHECK-SAME: %[[Y:.*]]: memref<4x8xf32>, %[[M:.*]]: index) attributes {switchyard.outlined_op}
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: scf.for %[[I:.*]] = %[[C0]] to %[[M]]
// CHECK:   memref.store %[[ONE]], %[[Y]][%[[I]], %[[C0]]]
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[A:[^:]*]]: memref<4x8xf32>, %[[B:[^:]*]]: memref<4x8xf32>, %[[N:[^:]*]]: index)
// CHECK: call @forward_op0(%[[A]]) : (memref<4x8xf32>) -> ()
// CHECK: call @forward_op0(%[[B]]) : (memref<4x8xf32>) -> ()
// CHECK: call @forward_op1(%[[A]], %[[N]]) : (memref<4x8xf32>, index) -> ()
// CHECK: return
// CHECK-LABEL: func.func @backward(
// CHECK: call @forward_op0(%{{.*}}) : (memref<4x8xf32>) -> ()

// Inlined back: the code as it was, the constants at the start.
// BACK-LABEL: func.func @forward(
// BACK-SAME: %[[A:[^:]*]]: memref<4x8xf32>, %[[B:[^:]*]]: memref<4x8xf32>, %[[N:[^:]*]]: index)
// BACK-DAG: %[[C0:.*]] = arith.constant 0 : index
// BACK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// BACK: linalg.exp ins(%[[A]] : memref<4x8xf32>) outs(%[[A]] : memref<4x8xf32>)
// BACK: linalg.exp ins(%[[B]] : memref<4x8xf32>) outs(%[[B]] : memref<4x8xf32>)
// BACK: scf.for %[[I:.*]] = %[[C0]] to %[[N]]
// BACK:   memref.store %[[ONE]], %[[A]][%[[I]], %[[C0]]]
// BACK-LABEL: func.func @backward(
// BACK: linalg.exp
// BACK-NOT: call
// BACK-NOT: switchyard.outlined_op
func.func @forward(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  linalg.exp ins(%a : memref<4x8xf32>) outs(%a : memref<4x8xf32>)
  linalg.exp ins(%b : memref<4x8xf32>) outs(%b : memref<4x8xf32>)
  scf.for %i = %c0 to %n step %c1 {
    memref.store %one, %a[%i, %c0] : memref<4x8xf32>
  }
  return
}
func.func @backward(%a: memref<4x8xf32>) {
  linalg.exp ins(%a : memref<4x8xf32>) outs(%a : memref<4x8xf32>)
  return
}

// -----

// Ops that differ in a constant or a type get functions of their own. An
// op that uses a scalar computed on the host (a float, or an index computed
// from one read from a buffer) stays, and so does what forms no kernel.
// CHECK-LABEL: func.func private @step_op0(
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK-LABEL: func.func private @step_op1(
// CHECK: arith.constant 3.000000e+00 : f32
// CHECK-LABEL: func.func @step(
// CHECK: call @step_op0(
// CHECK: call @step_op1(
// CHECK: memref.load
// CHECK: linalg.generic
// CHECK: memref.load
// CHECK: scf.for
// CHECK-NOT: call
// CHECK: memref.dealloc
// CHECK: return
#map = affine_map<(d0) -> (d0)>
func.func @step(%a: memref<8xf32>, %hyper: memref<f32>, %counts: memref<2xindex>) {
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  linalg.fill ins(%two : f32) outs(%a : memref<8xf32>)
  linalg.fill ins(%three : f32) outs(%a : memref<8xf32>)
  %lr = memref.load %hyper[] : memref<f32>
  linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%a : memref<8xf32>) {
  ^bb0(%x: f32):
    %y = arith.mulf %x, %lr : f32
    linalg.yield %y : f32
  }
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.load %counts[%c0] : memref<2xindex>
  %rows = arith.muli %n, %c1 : index
  scf.for %i = %c0 to %rows step %c1 {
    memref.store %two, %a[%i] : memref<8xf32>
  }
  %t = memref.alloc() : memref<8xf32>
  memref.dealloc %t : memref<8xf32>
  return
}

// -----

// fills-with-users: a fill and the op right after it that writes the
// filled buffer go into one function (the CPU's matmul kernel folds the
// zeros); a fill followed by an op on another buffer is outlined alone.
// Without the option each op has its own function.
// PAIR-LABEL: func.func private @filled_op0(
// PAIR-SAME: %[[D:[^:]*]]: memref<4x8xf32>, %[[X:[^:]*]]: memref<4x4xf32>, %[[W:[^:]*]]: memref<4x8xf32>)
// PAIR: linalg.fill ins(%{{.*}} : f32) outs(%[[D]] : memref<4x8xf32>)
// PAIR-NEXT: linalg.matmul ins(%[[X]], %[[W]] : memref<4x4xf32>, memref<4x8xf32>) outs(%[[D]] : memref<4x8xf32>)
// PAIR-NEXT: return
// PAIR-LABEL: func.func private @filled_op1(
// PAIR: linalg.fill
// PAIR-NEXT: return
// PAIR-LABEL: func.func @filled(
// PAIR-COUNT-3: call @filled_op
// PAIR-NOT: call
// CHECK-LABEL: func.func @filled(
// CHECK-COUNT-4: call @filled_op
func.func @filled(%x: memref<4x4xf32>, %w: memref<4x8xf32>, %d: memref<4x8xf32>, %e: memref<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%d : memref<4x8xf32>)
  linalg.matmul ins(%x, %w : memref<4x4xf32>, memref<4x8xf32>) outs(%d : memref<4x8xf32>)
  linalg.fill ins(%zero : f32) outs(%e : memref<4x8xf32>)
  linalg.exp ins(%w : memref<4x8xf32>) outs(%d : memref<4x8xf32>)
  return
}

// -----

// fills-with-users: a fill moves down to the op that writes its buffer past
// allocations (and ops without memory effects) that do not use it, and goes
// into that op's function; a fill with another op on memory in between
// stays where it is, alone.
// PAIR-LABEL: func.func private @sunk_op0(
// PAIR: linalg.fill
// PAIR-NEXT: linalg.matmul
// PAIR-NEXT: return
// PAIR-LABEL: func.func private @sunk_op1(
// PAIR: linalg.fill
// PAIR-NEXT: return
// PAIR-LABEL: func.func @sunk(
// PAIR: %[[T:.*]] = memref.alloc() : memref<4x4xf32>
// PAIR-NEXT: call @sunk_op0(
// PAIR: call @sunk_op1(
// PAIR-NEXT: call @sunk_op
// PAIR-NEXT: call @sunk_op
// PAIR-NOT: call
func.func @sunk(%x: memref<4x4xf32>, %w: memref<4x8xf32>, %d: memref<4x8xf32>, %e: memref<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%d : memref<4x8xf32>)
  %t = memref.alloc() : memref<4x4xf32>
  linalg.matmul ins(%x, %w : memref<4x4xf32>, memref<4x8xf32>) outs(%d : memref<4x8xf32>)
  linalg.fill ins(%zero : f32) outs(%e : memref<4x8xf32>)
  linalg.exp ins(%x : memref<4x4xf32>) outs(%t : memref<4x4xf32>)
  linalg.matmul ins(%t, %w : memref<4x4xf32>, memref<4x8xf32>) outs(%e : memref<4x8xf32>)
  memref.dealloc %t : memref<4x4xf32>
  return
}

// -----

// A contraction's marked epilogue (switchyard-mark-epilogues) goes into its
// function; one that uses a float from above stays where it is, and so do
// its contraction and fill, so that the tensor-core pass still finds the
// epilogue right after the contraction.
// PAIR-LABEL: func.func private @epilogues_op0(
// PAIR: linalg.fill
// PAIR-NEXT: linalg.matmul
// PAIR-NEXT: linalg.generic
// PAIR-SAME: switchyard.epilogue
// PAIR-NEXT: ^bb
// PAIR: return
// PAIR-LABEL: func.func @epilogues(
// PAIR: call @epilogues_op0(
// PAIR-NEXT: linalg.fill
// PAIR-NEXT: linalg.matmul
// PAIR-NEXT: linalg.generic
// PAIR-SAME: switchyard.epilogue
// PAIR-NOT: call
func.func @epilogues(%x: memref<4x4xf32>, %w: memref<4x8xf32>, %c: memref<4x8xf32>, %y: memref<4x8xf32>, %s: f32) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x8xf32>)
  linalg.matmul ins(%x, %w : memref<4x4xf32>, memref<4x8xf32>) outs(%c : memref<4x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x8xf32>) outs(%y : memref<4x8xf32>) attrs = {switchyard.epilogue} {
  ^bb0(%in: f32, %o: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%c : memref<4x8xf32>)
  linalg.matmul ins(%x, %w : memref<4x4xf32>, memref<4x8xf32>) outs(%c : memref<4x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x8xf32>) outs(%y : memref<4x8xf32>) attrs = {switchyard.epilogue} {
  ^bb0(%in: f32, %o: f32):
    %r = arith.mulf %in, %s : f32
    linalg.yield %r : f32
  }
  return
}

// RUN: switchyard-opt %s --split-input-file --switchyard-cpu-outline-loops | FileCheck %s

// Each top-level loop nest becomes a private, noinline function called in
// its place: the constants it uses are cloned in (its bounds stay
// constant), the buffers are arguments. Loops with results, and what is
// not a loop, stay.
// CHECK-LABEL: func.func private @step_loop0(
// CHECK-SAME: %[[A:.*]]: memref<64xf32>) attributes {passthrough = ["noinline"]}
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : index
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: scf.for %[[I:.*]] = %[[C0]] to %[[C64]] step %{{.*}} {
// CHECK:   memref.store %[[ONE]], %[[A]][%[[I]]]
// CHECK: return
// CHECK-LABEL: func.func private @step_loop1(
// CHECK-SAME: %{{.*}}: memref<64xf32>, %{{.*}}: memref<64xf32>, %{{.*}}: index) attributes {passthrough = ["noinline"]}
// CHECK: scf.for
// CHECK:   scf.for
// A function that keeps a loop is optimised as usual.
// CHECK-LABEL: func.func @step(
// CHECK-NOT: passthrough
// CHECK: call @step_loop0(%{{.*}}) : (memref<64xf32>) -> ()
// CHECK: call @step_loop1(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<64xf32>, memref<64xf32>, index) -> ()
// CHECK: %[[SUM:.*]] = scf.for {{.*}} iter_args
// CHECK: return %[[SUM]]
func.func @step(%a: memref<64xf32>, %b: memref<64xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c64 step %c1 {
    memref.store %one, %a[%i] : memref<64xf32>
  }
  scf.for %i = %c0 to %n step %c1 {
    scf.for %j = %c0 to %c64 step %c1 {
      %x = memref.load %a[%j] : memref<64xf32>
      memref.store %x, %b[%j] : memref<64xf32>
    }
  }
  %sum = scf.for %i = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> f32 {
    %x = memref.load %b[%i] : memref<64xf32>
    %s = arith.addf %acc, %x : f32
    scf.yield %s : f32
  }
  return %sum : f32
}

// -----

// A name that is taken is skipped. A function left without loops
// (straight-line code, run once per call) that nothing calls gets code
// generation at -O0, a private one too; a loop nest's does not.
// CHECK-LABEL: func.func private @taken_loop0(
// CHECK-SAME: attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]}
// CHECK-LABEL: func.func private @taken_loop1(
// CHECK-SAME: attributes {passthrough = ["noinline"]}
// CHECK-LABEL: func.func @taken(
// CHECK-SAME: attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]}
// CHECK: call @taken_loop1(
func.func private @taken_loop0() {
  return
}
func.func @taken(%a: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c64 step %c1 {
    memref.store %one, %a[%i] : memref<64xf32>
  }
  return
}

// -----

// A function that only straight-line functions call (a training step
// calling its gradient function, which calls the blocks' forward and
// backward functions) is one too, private or not; one called from a loop
// is not.
// CHECK-LABEL: func.func private @called_privately(
// CHECK-SAME: attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]}
// CHECK-LABEL: func.func @called(
// CHECK-SAME: attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]}
// CHECK-LABEL: func.func @caller(
// CHECK-SAME: attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]}
// CHECK-LABEL: func.func @called_in_a_loop(
// CHECK-NOT: passthrough
// CHECK-LABEL: func.func private @looping_caller_loop0(
func.func private @called_privately(%a: memref<64xf32>) {
  return
}
func.func @called(%a: memref<64xf32>) {
  call @called_privately(%a) : (memref<64xf32>) -> ()
  return
}
func.func @caller(%a: memref<64xf32>) {
  call @called(%a) : (memref<64xf32>) -> ()
  return
}
func.func @called_in_a_loop(%a: memref<64xf32>) {
  return
}
func.func @looping_caller(%a: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    func.call @called_in_a_loop(%a) : (memref<64xf32>) -> ()
  }
  return
}

// -----

// A loop nest identical to one outlined before (up to locations), in the
// same function or another, calls that function; one that differs in a
// constant, an attribute or a type gets its own.
// CHECK-LABEL: func.func private @forward_loop0(
// CHECK-SAME: memref<64xf32>)
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK-LABEL: func.func private @forward_loop1(
// CHECK-SAME: memref<64xf32>)
// CHECK: arith.constant 3.000000e+00 : f32
// CHECK-LABEL: func.func private @forward_loop2(
// CHECK-SAME: memref<32xf32>)
// CHECK-LABEL: func.func @forward(
// CHECK: call @forward_loop0(%arg0)
// CHECK-NEXT: call @forward_loop0(%arg1)
// CHECK-NEXT: call @forward_loop1(%arg0)
// CHECK-NEXT: call @forward_loop2(%arg2)
// CHECK-NEXT: return
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @backward(
// CHECK: call @forward_loop0(%arg1)
// CHECK-NEXT: call @forward_loop1(%arg0)
// CHECK-NEXT: return
func.func @forward(%a: memref<64xf32>, %b: memref<64xf32>, %c: memref<32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %a[%i] : memref<64xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %a[%i] : memref<64xf32>
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %b[%i] : memref<64xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %b[%i] : memref<64xf32>
  } loc("elsewhere")
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %a[%i] : memref<64xf32>
    %y = arith.mulf %x, %three : f32
    memref.store %y, %a[%i] : memref<64xf32>
  }
  scf.for %i = %c0 to %c32 step %c1 {
    %x = memref.load %c[%i] : memref<32xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %c[%i] : memref<32xf32>
  }
  return
}
func.func @backward(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %b[%i] : memref<64xf32>
    %y = arith.mulf %x, %two : f32
    memref.store %y, %b[%i] : memref<64xf32>
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %a[%i] : memref<64xf32>
    %y = arith.mulf %x, %three : f32
    memref.store %y, %a[%i] : memref<64xf32>
  }
  return
}

// -----

// Runtime checks (cf.assert: the GPU emulation's bounds checks) name their
// op and its place: nests that differ only in those messages (a model's
// layers) share one function, whose checks give the message of every copy,
// each once. A nest whose checks differ otherwise gets its own.
// CHECK-LABEL: func.func private @layers_loop0(
// CHECK: cf.assert %{{.*}}, "load at layer 0\0A(or, in a copy of this loop nest that shares its code:)\0Aload at layer 1"
// CHECK: cf.assert %{{.*}}, "store at any layer"
// CHECK-LABEL: func.func private @layers_loop1(
// CHECK: cf.assert %{{.*}}, "load at layer 2"
// CHECK-LABEL: func.func @layers(
// CHECK: call @layers_loop0(%arg1, %arg0)
// CHECK-NEXT: call @layers_loop0(%arg1, %arg0)
// CHECK-NEXT: call @layers_loop0(%arg1, %arg0)
// CHECK-NEXT: call @layers_loop1(%arg1, %arg0)
func.func @layers(%a: memref<64xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c64 step %c1 {
    %ok = arith.cmpi ult, %i, %n : index
    cf.assert %ok, "load at layer 0"
    %x = memref.load %a[%i] : memref<64xf32>
    cf.assert %ok, "store at any layer"
    memref.store %x, %a[%i] : memref<64xf32>
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %ok = arith.cmpi ult, %i, %n : index
    cf.assert %ok, "load at layer 1"
    %x = memref.load %a[%i] : memref<64xf32>
    cf.assert %ok, "store at any layer"
    memref.store %x, %a[%i] : memref<64xf32>
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %ok = arith.cmpi ult, %i, %n : index
    cf.assert %ok, "load at layer 0"
    %x = memref.load %a[%i] : memref<64xf32>
    cf.assert %ok, "store at any layer"
    memref.store %x, %a[%i] : memref<64xf32>
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %ok = arith.cmpi ule, %i, %n : index
    cf.assert %ok, "load at layer 2"
    %x = memref.load %a[%i] : memref<64xf32>
    memref.store %x, %a[%i] : memref<64xf32>
  }
  return
}

// -----

// A loop marked switchyard.parallel (independent iterations) with a
// constant step: its bounds become the function's first two arguments,
// which each call passes (a constant bound cloned next to the call, an
// argument as it is), and the function's passthrough names the step for
// the JIT (dispatchParallelLoops). The same nest again shares the function.
// A marked loop with a step that is not constant is outlined as any other.
// CHECK-LABEL: func.func private @rows_loop0(
// CHECK-SAME: %[[LO:.*]]: index, %[[HI:.*]]: index, %[[A:.*]]: memref<?xf32>, %{{.*}}: index)
// CHECK-SAME: attributes {passthrough = ["noinline", ["switchyard-parallel-for", "4"]]}
// CHECK: scf.for %{{.*}} = %[[LO]] to %[[HI]] step %{{.*}} {
// CHECK-NOT: switchyard.parallel
// CHECK: return
// CHECK-LABEL: func.func private @rows_loop1(
// CHECK-SAME: %{{.*}}: memref<?xf32>, %{{.*}}: index, %{{.*}}: index) attributes {passthrough = ["noinline"]}
// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[X:.*]]: memref<?xf32>, %[[N:.*]]: index, %[[S:.*]]: index)
// CHECK: arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[C2:.*]] = arith.constant 2 : index
// CHECK-NEXT: call @rows_loop0(%[[C2]], %[[N]], %[[X]], %[[N]])
// CHECK-NEXT: %[[C2B:.*]] = arith.constant 2 : index
// CHECK-NEXT: call @rows_loop0(%[[C2B]], %[[N]], %[[X]], %[[N]])
// CHECK-NEXT: call @rows_loop1(%[[X]], %[[N]], %[[S]])
func.func @rows(%x: memref<?xf32>, %n: index, %s: index) {
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  scf.for %i = %c2 to %n step %c4 {
    memref.store %one, %x[%i] : memref<?xf32>
  } {switchyard.parallel}
  scf.for %i = %c2 to %n step %c4 {
    memref.store %one, %x[%i] : memref<?xf32>
  } {switchyard.parallel}
  scf.for %i = %c2 to %n step %s {
    memref.store %one, %x[%i] : memref<?xf32>
  } {switchyard.parallel}
  return
}

// -----

// A loop's stack temporaries move to the entry of its function: one per
// call, not one per iteration.
// CHECK-LABEL: func.func private @rows_loop0(
// CHECK-NEXT: %[[T:.*]] = memref.alloca() : memref<f32>
// CHECK: scf.for
// CHECK-NOT: memref.alloca
// CHECK: memref.store %{{.*}}, %[[T]][]
func.func @rows(%out: memref<8xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %t = memref.alloca() : memref<f32>
    memref.store %v, %t[] : memref<f32>
    %w = memref.load %t[] : memref<f32>
    memref.store %w, %out[%i] : memref<8xf32>
  } {switchyard.parallel}
  return
}

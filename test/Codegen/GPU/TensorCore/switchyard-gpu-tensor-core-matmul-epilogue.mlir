// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=bf16 tensor-cores=true}))' | FileCheck %s
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=bf16}))' | FileCheck %s --check-prefix=SIMT

// A marked epilogue (switchyard-mark-epilogues) right after the matmul: the
// kernel stores each element of C, then reads the bias at its column,
// applies the body and stores the result; the consumer's op goes. Without
// tensor cores (the SIMT route) it stays, a kernel of its own.
// CHECK-LABEL: func.func @bias_relu(
// CHECK-SAME: %[[X:[^:]*]]: memref<?x64xf32>, %[[W:[^:]*]]: memref<48x64xf32>, %[[B:[^:]*]]: memref<48xf32>, %[[C:[^:]*]]: memref<?x48xf32>, %[[H:[^:]*]]: memref<?x48xf32>)
// CHECK: gpu.launch
// CHECK: memref.store %[[V:.*]], %[[C]][%[[M:.*]], %[[N:.*]]] : memref<?x48xf32>
// CHECK-NEXT: %[[BIAS:.*]] = memref.load %[[B]][%[[N]]] : memref<48xf32>
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[V]], %[[BIAS]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.maximumf %[[S]], %{{.*}} : f32
// CHECK-NEXT: memref.store %[[R]], %[[H]][%[[M]], %[[N]]] : memref<?x48xf32>
// CHECK: gpu.terminator
// CHECK-NOT: linalg.generic
// CHECK: return
// SIMT-LABEL: func.func @bias_relu(
// SIMT: linalg.generic
// SIMT: linalg.generic {{.*}} attrs = {switchyard.epilogue}
func.func @bias_relu(%x: memref<?x64xf32>, %w: memref<48x64xf32>, %b: memref<48xf32>, %c: memref<?x48xf32>, %h: memref<?x48xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<?x48xf32>)
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x64xf32>, memref<48x64xf32>) outs(%c : memref<?x48xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %m = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n)>, affine_map<(m, n) -> (m, n)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c, %b : memref<?x48xf32>, memref<48xf32>) outs(%h : memref<?x48xf32>) attrs = {switchyard.epilogue} {
  ^bb0(%v: f32, %bias: f32, %o: f32):
    %s = arith.addf %v, %bias : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A weight gradient split along its long K: each block stores its part,
// the last block of the tile adds the parts, stores C and computes the
// epilogue (its indices the element's).
// CHECK-LABEL: func.func @split(
// CHECK-SAME: %[[X:[^:]*]]: memref<?x40xf32>, %[[DY:[^:]*]]: memref<?x33xf32>, %[[G:[^:]*]]: memref<40x33xf32>, %[[U:[^:]*]]: memref<40x33xi1>)
// CHECK: gpu.launch
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: %[[SUM:.*]] = scf.for
// CHECK: memref.store %[[SUM]], %[[G]][%[[M:.*]], %[[N:.*]]]
// CHECK-NEXT: %[[POS:.*]] = arith.cmpf ogt, %[[SUM]], %{{.*}} : f32
// CHECK-NEXT: %[[I:.*]] = arith.cmpi eq, %[[M]], %[[N]] : index
// CHECK-NEXT: %[[BOTH:.*]] = arith.andi %[[POS]], %[[I]] : i1
// CHECK-NEXT: memref.store %[[BOTH]], %[[U]][%[[M]], %[[N]]] : memref<40x33xi1>
// CHECK: gpu.terminator
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @split(%x: memref<?x40xf32>, %dy: memref<?x33xf32>, %g: memref<40x33xf32>, %u: memref<40x33xi1>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%g : memref<40x33xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, o, t) -> (t, i)>, affine_map<(i, o, t) -> (t, o)>, affine_map<(i, o, t) -> (i, o)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : memref<?x40xf32>, memref<?x33xf32>) outs(%g : memref<40x33xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%g : memref<40x33xf32>) outs(%u : memref<40x33xi1>) attrs = {switchyard.epilogue} {
  ^bb0(%v: f32, %o: i1):
    %pos = arith.cmpf ogt, %v, %zero : f32
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %d = arith.cmpi eq, %i, %j : index
    %r = arith.andi %pos, %d : i1
    linalg.yield %r : i1
  }
  return
}

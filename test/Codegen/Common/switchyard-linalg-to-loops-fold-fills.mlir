// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-linalg-to-loops{parallel=1 fold-fills=1}))" --split-input-file | FileCheck %s
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-linalg-to-loops{fold-fills=1}))" --split-input-file | FileCheck %s --check-prefix=SEQ

// A fill directly before the reduction into its buffer: the reduction's
// nest stores the fill's value per output element, before its reduction
// loop; one nest (one kernel on the GPU) instead of two.
// CHECK-LABEL: func.func @row_sums
// CHECK-SAME: (%[[X:.*]]: memref<?x8xf32>, %[[Y:.*]]: memref<?xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00
// CHECK: scf.parallel (%[[R:.*]]) =
// CHECK-NEXT: memref.store %[[ZERO]], %[[Y]][%[[R]]]
// CHECK-NEXT: scf.for
// CHECK: memref.load %[[Y]][%[[R]]]
// CHECK: memref.store {{.*}}, %[[Y]][%[[R]]]
// CHECK-NOT: scf.parallel
// CHECK: return

// SEQ-LABEL: func.func @row_sums
// SEQ: scf.for %[[R:.*]] =
// SEQ-NEXT: memref.store %{{.*}}, %{{.*}}[%[[R]]]
// SEQ-NEXT: scf.for
// SEQ-NOT: scf.for
// SEQ: return
func.func @row_sums(%x: memref<?x8xf32>, %y: memref<?xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<?xf32>)
  linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                       affine_map<(d0, d1) -> (d0)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x8xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The output indexed by a permutation of the parallel dimensions: the store
// uses the output's indices. An elementwise op that reads its output gets
// the store at the start of its innermost body.
// CHECK-LABEL: func.func @transposed
// CHECK-SAME: (%[[X:.*]]: memref<4x6x8xf32>, %[[Y:.*]]: memref<6x4xf32>, %[[Z:.*]]: memref<4x6xf32>)
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]]) =
// CHECK-NEXT: memref.store %{{.*}}, %[[Y]][%[[J]], %[[I]]]
// CHECK-NEXT: scf.for
// CHECK: scf.parallel (%[[K:.*]], %[[L:.*]]) =
// CHECK-NEXT: memref.store %{{.*}}, %[[Z]][%[[K]], %[[L]]]
// CHECK: memref.load %[[Z]][%[[K]], %[[L]]]
func.func @transposed(%x: memref<4x6x8xf32>, %y: memref<6x4xf32>, %z: memref<4x6xf32>) {
  %lowest = arith.constant -3.0e38 : f32
  linalg.fill ins(%lowest : f32) outs(%y : memref<6x4xf32>)
  linalg.generic {
      indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                       affine_map<(d0, d1, d2) -> (d1, d0)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<4x6x8xf32>) outs(%y : memref<6x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.maxnumf %a, %b : f32
    linalg.yield %m : f32
  }
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%z : memref<4x6xf32>)
  linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>,
                       affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%y : memref<6x4xf32>) outs(%z : memref<4x6xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left as two nests: a reduction dimension before a parallel one (a column
// sum in the CPU's vector-friendly order), a fill of another buffer, an op
// that also reads the filled buffer as an input, and a whole-buffer
// reduction (no parallel dimension to store in).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-4: scf.parallel
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @kept(%x: memref<8x4xf32>, %y: memref<4xf32>, %z: memref<4xf32>, %s: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<4xf32>)
  linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                       affine_map<(d0, d1) -> (d1)>],
      iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<8x4xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  }
  linalg.fill ins(%zero : f32) outs(%z : memref<4xf32>)
  linalg.generic {
      indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]}
      ins(%z : memref<4xf32>) outs(%z : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<f32>)
  linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                       affine_map<(d0, d1) -> ()>],
      iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<8x4xf32>) outs(%s : memref<f32>) {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  }
  return
}

// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-linalg-to-loops{parallel=1}))" | FileCheck %s --check-prefix=PAR
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-linalg-to-loops))" | FileCheck %s --check-prefix=SEQ
// The same result as upstream's passes, op for op (constants that the
// folding hoists to the top may come in another order: here none does):
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-linalg-to-loops{parallel=1}))" > %t.ours
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops))" > %t.upstream
// RUN: diff %t.ours %t.upstream
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-linalg-to-loops))" > %t.ours-seq
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(convert-linalg-to-loops))" > %t.upstream-seq
// RUN: diff %t.ours-seq %t.upstream-seq

// A row sum: the parallel dimension an scf.parallel (scf.for without
// `parallel`), the reduction an scf.for inside it; linalg.index reads the
// induction variable. The function's other ops are folded as upstream's
// greedy clean-up folds them: the duplicate constant and the addition of
// zero go, the dead memref.dim too.
// PAR-LABEL: func.func @row_sums
// PAR-SAME: (%[[X:.*]]: memref<?x8xf32>, %[[Y:.*]]: memref<?xf32>, %[[I:.*]]: index)
// PAR-DAG: %[[C0:.*]] = arith.constant 0 : index
// PAR-DAG: %[[C1:.*]] = arith.constant 1 : index
// PAR-DAG: %[[C8:.*]] = arith.constant 8 : index
// PAR: %[[N:.*]] = memref.dim %[[X]], %[[C0]]
// PAR: scf.parallel (%[[R:.*]]) = (%[[C0]]) to (%[[N]]) step (%[[C1]])
// PAR: scf.for %[[K:.*]] = %[[C0]] to %[[C8]] step %[[C1]]
// PAR: %[[A:.*]] = memref.load %[[X]][%[[R]], %[[K]]]
// PAR: %[[B:.*]] = memref.load %[[Y]][%[[R]]]
// PAR: %[[F:.*]] = arith.index_cast %[[K]] : index to i64
// PAR: memref.store {{.*}}, %[[Y]][%[[R]]]
// PAR-NOT: linalg.
// PAR-NOT: arith.addi
// PAR: memref.store {{.*}}, %[[Y]][%[[I]]]
// PAR: return

// SEQ-LABEL: func.func @row_sums
// SEQ: scf.for %[[R:.*]] =
// SEQ: scf.for %[[K:.*]] =
// SEQ-NOT: scf.parallel
// SEQ-NOT: linalg.
// SEQ: return
func.func @row_sums(%x: memref<?x8xf32>, %y: memref<?xf32>, %i: index) {
  %one = arith.constant 1.0 : f32
  %c0 = arith.constant 0 : index
  %c0_again = arith.constant 0 : index
  %unused = memref.dim %x, %c0 : memref<?x8xf32>
  linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                       affine_map<(d0, d1) -> (d0)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x8xf32>) outs(%y : memref<?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %k = linalg.index 1 : index
    %k64 = arith.index_cast %k : index to i64
    %kf = arith.sitofp %k64 : i64 to f32
    %p = arith.mulf %a, %kf : f32
    %s = arith.addf %p, %b : f32
    linalg.yield %s : f32
  }
  %same = arith.addi %i, %c0_again : index
  memref.store %one, %y[%same] : memref<?xf32>
  return
}

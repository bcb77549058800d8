// RUN: switchyard-opt %s --convert-moe-to-linalg | FileCheck %s --check-prefix=ONEHOT
// RUN: switchyard-opt %s --convert-moe-to-linalg=scatter-embedding-gradient | FileCheck %s --check-prefix=SCATTER
// RUN: switchyard-opt %s --convert-moe-to-linalg=scatter-embedding-gradient --switchyard-cpu-pipeline -o /dev/null

// moe.embed_grad, the embedding's gradient, as the GPU takes it: the
// one-hot matrix of the tokens [N, V] contracted with dy over the tokens
// (a matmul for the tensor-core kernels, no atomics).
// ONEHOT-LABEL: func.func @embed_grad
// ONEHOT: %[[HOT:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} outs(%{{.*}} : tensor<?x256xf32>)
// ONEHOT: arith.cmpi eq
// ONEHOT: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins(%[[HOT]], %{{.*}} : tensor<?x256xf32>, tensor<?x16xf32>) outs(%{{.*}} : tensor<256x16xf32>)
// ONEHOT-NOT: moe.

// As the CPU takes it: each row of dy added into its token's row, column
// blocks of 64 independent (a forall; 16 columns: one block), the tokens in
// order within a block (N·D additions, not V·N·D).
// SCATTER-LABEL: func.func @embed_grad
// SCATTER: %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<256x16xf32>
// SCATTER: scf.forall (%[[B:.*]]) in (1) shared_outs(%[[OUT:.*]] = %[[ZERO]])
// SCATTER:   %[[BLOCK:.*]] = tensor.extract_slice %[[OUT]][0, %{{.*}}] [256, %{{.*}}] [1, 1]
// SCATTER:   scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[BLOCK]])
// SCATTER:     %[[ID:.*]] = arith.index_cast
// SCATTER:     %[[ROW:.*]] = tensor.extract_slice %[[ACC]][%[[ID]], 0]
// SCATTER:     tensor.extract_slice %{{.*}}[%[[N]], %{{.*}}]
// SCATTER:     %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel"]
// SCATTER:     arith.addf
// SCATTER:     tensor.insert_slice %[[SUM]] into %[[ACC]][%[[ID]], 0]
// SCATTER:   tensor.parallel_insert_slice
// SCATTER-NOT: moe.
func.func @embed_grad(%t: tensor<?xi32>, %dy: tensor<?x16xf32>) -> tensor<256x16xf32> {
  %d = moe.embed_grad %t, %dy : tensor<?xi32>, tensor<?x16xf32> -> tensor<256x16xf32>
  return %d : tensor<256x16xf32>
}

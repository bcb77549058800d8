// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-parallel-dims-first))" | FileCheck %s

// A norm's weight gradient sums over batch and time (reductions before the
// parallel channel): the channel becomes the outer dimension, the two
// reductions keep their order.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d1, d2, d0)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-LABEL: func.func @sum_over_tokens
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction", "reduction"]}
func.func @sum_over_tokens(%x: memref<?x8x16xf32>, %y: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>],
                  iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%x : memref<?x8x16xf32>) outs(%y : memref<16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// Already in order: untouched.
// CHECK-LABEL: func.func @rows
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%{{.*}} : memref<4x8xf32>)
func.func @rows(%x: memref<4x8xf32>, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

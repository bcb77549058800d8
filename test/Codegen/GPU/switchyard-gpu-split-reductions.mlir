// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-split-reductions))" | FileCheck %s

// The squared norm of a weight gradient: the trailing dimension (1236
// columns >= min-threads) becomes parallel, then the 1236 partial sums are
// added into the original buffer, whose value is kept.
// CHECK-DAG: #[[ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[ID1:.*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[SCALAR1:.*]] = affine_map<(d0) -> ()>
// CHECK-DAG: #[[X3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[TD:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-LABEL: func.func @squared_norm
// CHECK-SAME: (%[[G:.*]]: memref<412x1236xf32>, %[[NORM:.*]]: memref<f32>)
// CHECK: %[[P:.*]] = gpu.alloc () : memref<1236xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ZERO]] : f32) outs(%[[P]] : memref<1236xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[ID2]], #[[COL]]], iterator_types = ["reduction", "parallel"]}
// CHECK-SAME: ins(%[[G]] : memref<412x1236xf32>) outs(%[[P]] : memref<1236xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: linalg.generic {indexing_maps = [#[[ID1]], #[[SCALAR1]]], iterator_types = ["reduction"]}
// CHECK-SAME: ins(%[[P]] : memref<1236xf32>) outs(%[[NORM]] : memref<f32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[OUT]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[S]]
// CHECK: gpu.dealloc %[[P]] : memref<1236xf32>
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @squared_norm(%g: memref<412x1236xf32>, %norm: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%g : memref<412x1236xf32>) outs(%norm : memref<f32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %out, %sq : f32
    linalg.yield %s : f32
  }
  return
}

// Experts' weights: 76 trailing elements are too few threads, so 412 x 76
// become parallel; their partial sums are split again (76 parallel), and
// the 76 sums added last. The accumulator may be either operand.
// CHECK-LABEL: func.func @experts
// CHECK: %[[P1:.*]] = gpu.alloc () : memref<412x76xf32>
// CHECK: iterator_types = ["reduction", "parallel", "parallel"]
// CHECK-SAME: outs(%[[P1]] : memref<412x76xf32>)
// CHECK: %[[P2:.*]] = gpu.alloc () : memref<76xf32>
// CHECK: iterator_types = ["reduction", "parallel"]
// CHECK-SAME: ins(%[[P1]] : memref<412x76xf32>) outs(%[[P2]] : memref<76xf32>)
// CHECK: iterator_types = ["reduction"]
// CHECK-SAME: ins(%[[P2]] : memref<76xf32>) outs(%{{.*}} : memref<f32>)
// CHECK: gpu.dealloc %[[P2]]
// CHECK: gpu.dealloc %[[P1]]
func.func @experts(%w: memref<5x412x76xf32>, %norm: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> ()>],
                  iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%w : memref<5x412x76xf32>) outs(%norm : memref<f32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  }
  return
}

// A dynamic batch (a loss over tokens): split, the partial buffer sized
// by the trailing extent; the maximum starts from -inf.
// CHECK-LABEL: func.func @dynamic_max
// CHECK-SAME: (%[[X:.*]]: memref<?x?xf32>
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[N:.*]] = memref.dim %[[X]], %[[C1]]
// CHECK: %[[P:.*]] = gpu.alloc (%[[N]]) : memref<?xf32>
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: iterator_types = ["reduction", "parallel"]
// CHECK: arith.maximumf
// CHECK: iterator_types = ["reduction"]
// CHECK: arith.maximumf
func.func @dynamic_max(%x: memref<?x?xf32>, %m: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<?x?xf32>) outs(%m : memref<f32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.maximumf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// Left alone: fewer than min-elements, a 1-D reduction (nothing to leave
// to the threads), a reduction with a parallel output, and a body that is
// not a single combiner (x - acc has no neutral element).
// CHECK-LABEL: func.func @untouched
// CHECK-NOT: gpu.alloc
// CHECK: return
func.func @untouched(%small: memref<4x8xf32>, %long: memref<100000xf32>,
                     %rows: memref<4096x4096xf32>, %r: memref<4096xf32>,
                     %s: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%small : memref<4x8xf32>) outs(%s : memref<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %out, %in : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%long : memref<100000xf32>) outs(%s : memref<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %out, %in : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%rows : memref<4096x4096xf32>) outs(%r : memref<4096xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %out, %in : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%rows : memref<4096x4096xf32>) outs(%s : memref<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.subf %in, %out : f32
    linalg.yield %a : f32
  }
  return
}

// A bias gradient: 412 threads would each sum 4096 rows. The time
// dimension becomes parallel too: partial sums [256, 412] over the batch,
// then 412 sums of 256 into the gradient (its map re-expressed over the
// kept dimensions).
// CHECK-LABEL: func.func @bias_gradient
// CHECK-SAME: (%[[DY:.*]]: memref<?x256x412xf32>, %[[DB:.*]]: memref<412xf32>)
// CHECK: %[[P:.*]] = gpu.alloc () : memref<256x412xf32>
// CHECK: linalg.generic {indexing_maps = [#[[X3]], #[[TD]]], iterator_types = ["reduction", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[DY]] : memref<?x256x412xf32>) outs(%[[P]] : memref<256x412xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[ID2]], #[[COL]]], iterator_types = ["reduction", "parallel"]}
// CHECK-SAME: ins(%[[P]] : memref<256x412xf32>) outs(%[[DB]] : memref<412xf32>)
// CHECK: gpu.dealloc %[[P]]
func.func @bias_gradient(%dy: memref<?x256x412xf32>, %db: memref<412xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>],
                  iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy : memref<?x256x412xf32>) outs(%db : memref<412xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// Enough threads already (4096 x 16 outputs), or one reduction dimension
// only: left alone.
// CHECK-LABEL: func.func @enough_threads
// CHECK-NOT: gpu.alloc
// CHECK: return
func.func @enough_threads(%x: memref<4096x8x16xf32>, %y: memref<4096x16xf32>,
                          %z: memref<4096x412xf32>, %w: memref<412xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<4096x8x16xf32>) outs(%y : memref<4096x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%z : memref<4096x412xf32>) outs(%w : memref<412xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}

// The thresholds are options.
// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-split-reductions{min-elements=16 min-threads=4}))" | FileCheck %s --check-prefix=SMALL
// SMALL-LABEL: func.func @untouched
// SMALL: gpu.alloc () : memref<8xf32>
// SMALL-NOT: gpu.alloc () : memref<100000xf32>

// RUN: switchyard-opt %s -switchyard-split-whole-reductions -split-input-file | FileCheck %s
// RUN: switchyard-opt %s -switchyard-split-whole-reductions -switchyard-fuse-rows -split-input-file | FileCheck %s --check-prefix=ROWS

// A gradient's sum of squares over 152 x 412 = 62624 elements: 16 rows of
// 3914 consecutive elements (16 is the divisor nearest to 62624 / 4096),
// each summed to a partial result from zero, then the 16 partial sums
// added into the op's output.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK-SAME: (%[[G:.*]]: tensor<152x412xf32>)
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[G]] {{\[}}[0, 1]] : tensor<152x412xf32> into tensor<62624xf32>
// CHECK: %[[BYROW:.*]] = tensor.expand_shape %[[FLAT]] {{\[}}[0, 1]] output_shape [16, 3914] : tensor<62624xf32> into tensor<16x3914xf32>
// CHECK: %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<16xf32>)
// CHECK: %[[P:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[BYROW]] : tensor<16x3914xf32>) outs(%[[INIT]] : tensor<16xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[S:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["reduction"]
// CHECK-SAME: ins(%[[P]] : tensor<16xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[OUT]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
// CHECK: return %[[S]]
// Each step a group of its own for the row kernels: a loop over the 16
// rows, then a loop of one iteration (one thread block).
// ROWS-LABEL: func.func @sum_of_squares
// ROWS: scf.forall (%{{.*}}) in (16)
// ROWS: scf.forall (%{{.*}}) in (1)
func.func @sum_of_squares(%g: tensor<152x412xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%g : tensor<152x412xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %r = arith.addf %out, %sq : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A maximum over two inputs read whole (a 1-D tensor needs no collapse):
// the partial results start from the maximum's neutral element.
// CHECK-LABEL: func.func @max_of_sums
// CHECK-NOT: tensor.collapse_shape
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [4, 4096] : tensor<16384xf32> into tensor<4x4096xf32>
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [4, 4096] : tensor<16384xf32> into tensor<4x4096xf32>
// CHECK: %[[NEUTRAL:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[NEUTRAL]] : f32)
// CHECK: arith.maximumf
// CHECK: ^bb0(%[[IN:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT: arith.maximumf %[[OUT]], %[[IN]] : f32
func.func @max_of_sums(%a: tensor<16384xf32>, %b: tensor<16384xf32>, %init: tensor<f32>) -> tensor<f32> {
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>,
                                        affine_map<(d0) -> (d0)>,
                                        affine_map<(d0) -> ()>],
                       iterator_types = ["reduction"]}
      ins(%a, %b : tensor<16384xf32>, tensor<16384xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %sum = arith.addf %x, %y : f32
    %r = arith.maximumf %out, %sum : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Left alone: at most 8192 elements (one thread block takes them whole),
// a dynamic size, an input not read in loop order, and an element count
// with no divisor that gives rows of 1024 elements or more (a prime).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: tensor.expand_shape
// CHECK: return
func.func @left_alone(%small: tensor<8192xf32>, %dynamic: tensor<?x412xf32>,
                      %square: tensor<512x512xf32>, %prime: tensor<16411xf32>,
                      %init: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
                       iterator_types = ["reduction"]}
      ins(%small : tensor<8192xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%dynamic : tensor<?x412xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%square : tensor<512x512xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %3 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>],
                       iterator_types = ["reduction"]}
      ins(%prime : tensor<16411xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// RUN: switchyard-opt %s --switchyard-cpu-loop-order --split-input-file | FileCheck %s

// dX = dY·W: the reduction o moves out, the output's unit-stride i in; a
// row update that LLVM vectorizes.
// CHECK-DAG: #[[DY:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[W:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[DX:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @matmul
// CHECK: linalg.generic {indexing_maps = [#[[DY]], #[[W]], #[[DX]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK: arith.addf {{.*}} fastmath<reassoc> : f32
func.func @matmul(%dy: memref<8x4xf32>, %w: memref<4x6xf32>, %dx: memref<8x6xf32>) {
  linalg.matmul ins(%dy, %w : memref<8x4xf32>, memref<4x6xf32>) outs(%dx : memref<8x6xf32>)
  return
}

// -----

// Y = X·Wᵀ: i is the unit-stride index of both inputs, so it stays
// innermost (a dot product), only marked reassoc.
// CHECK-LABEL: func.func @transposed
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.addf {{.*}} fastmath<reassoc> : f32
func.func @transposed(%x: memref<8x6xf32>, %w: memref<4x6xf32>, %y: memref<8x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, o, i) -> (n, i)>, affine_map<(n, o, i) -> (o, i)>, affine_map<(n, o, i) -> (n, o)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<8x6xf32>, memref<4x6xf32>) outs(%y : memref<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// dW = dYᵀ·X (loops o, i, n): the token sum n moves out, i in.
// CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2) -> (d1, d0)>
// CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @weight_grad
// CHECK: linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]], iterator_types = ["parallel", "reduction", "parallel"]}
func.func @weight_grad(%dy: memref<8x4xf32>, %x: memref<8x6xf32>, %dw: memref<4x6xf32>) {
  linalg.generic {indexing_maps = [affine_map<(o, i, n) -> (n, o)>, affine_map<(o, i, n) -> (n, i)>, affine_map<(o, i, n) -> (o, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dy, %x : memref<8x4xf32>, memref<8x6xf32>) outs(%dw : memref<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Element-wise ops (no reduction) are left alone.
// CHECK-LABEL: func.func @elementwise
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK-NOT: fastmath
func.func @elementwise(%x: memref<8x6xf32>, %y: memref<8x6xf32>) {
  linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<8x6xf32>) outs(%y : memref<8x6xf32>) {
  ^bb0(%a: f32, %c: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A softmax's row sums y[b, t] = Σ_v exp(x[b, t, v] − m[b, t]): v stays
// innermost (x read along its rows, m and y in place), though two of the
// three accesses have t as their last index: with t innermost x would be
// read down its columns, a gather per element.
// CHECK-LABEL: func.func @row_sums
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK: arith.addf {{.*}} fastmath<reassoc> : f32
func.func @row_sums(%x: memref<2x16x40xf32>, %m: memref<2x16xf32>, %y: memref<2x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, t, v) -> (b, t, v)>, affine_map<(b, t, v) -> (b, t)>, affine_map<(b, t, v) -> (b, t)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %m : memref<2x16x40xf32>, memref<2x16xf32>) outs(%y : memref<2x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %d = arith.subf %a, %b : f32
    %e = math.exp %d : f32
    %s = arith.addf %c, %e : f32
    linalg.yield %s : f32
  }
  return
}

// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-round-contraction-operands{element-type=bf16}))' | FileCheck %s
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-round-contraction-operands{element-type=f16}))' | FileCheck %s --check-prefix=F16
// RUN: switchyard-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(switchyard-round-contraction-operands{element-type=f32}))' | FileCheck %s --check-prefix=F32

// x·wᵀ (moe.linear's contraction): both factors rounded to bf16 and back
// before the product; the f32 accumulation stays.
// CHECK-LABEL: func.func @linear(
// CHECK: linalg.generic
// CHECK: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32):
// CHECK-NEXT: %[[TA:.*]] = arith.truncf %[[A]] : f32 to bf16
// CHECK-NEXT: %[[EA:.*]] = arith.extf %[[TA]] : bf16 to f32
// CHECK-NEXT: %[[TB:.*]] = arith.truncf %[[B]] : f32 to bf16
// CHECK-NEXT: %[[EB:.*]] = arith.extf %[[TB]] : bf16 to f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[EA]], %[[EB]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// F16-LABEL: func.func @linear(
// F16: arith.truncf %{{.*}} : f32 to f16
// F16-NEXT: arith.extf %{{.*}} : f16 to f32
// F16-NEXT: arith.truncf %{{.*}} : f32 to f16
// F16-NEXT: arith.extf %{{.*}} : f16 to f32
// F16-NEXT: arith.mulf
// F32-LABEL: func.func @linear(
// F32-NOT: arith.truncf
func.func @linear(%x: memref<?x64xf32>, %w: memref<48x64xf32>, %y: memref<?x48xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (n, k)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<?x64xf32>, memref<48x64xf32>)
      outs(%y : memref<?x48xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A batched contraction with the product on the other side of the sum and
// an input already in bf16: the existing cast is kept, the rounding added.
// CHECK-LABEL: func.func @batched(
// CHECK: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: f32, %[[C:.*]]: f32):
// CHECK-NEXT: %[[XA:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[TA:.*]] = arith.truncf %[[XA]] : f32 to bf16
// CHECK-NEXT: %[[EA:.*]] = arith.extf %[[TA]] : bf16 to f32
// CHECK-NEXT: %[[TB:.*]] = arith.truncf %[[B]] : f32 to bf16
// CHECK-NEXT: %[[EB:.*]] = arith.extf %[[TB]] : bf16 to f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[EA]], %[[EB]] : f32
// CHECK-NEXT: arith.addf %[[P]], %[[C]] : f32
func.func @batched(%a: memref<2x5x7xbf16>, %b: memref<2x7x3xf32>, %c: memref<2x5x3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                                   affine_map<(b, m, n, k) -> (b, k, n)>,
                                   affine_map<(b, m, n, k) -> (b, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x5x7xbf16>, memref<2x7x3xf32>)
      outs(%c : memref<2x5x3xf32>) {
  ^bb0(%x: bf16, %y: f32, %acc: f32):
    %xe = arith.extf %x : bf16 to f32
    %p = arith.mulf %xe, %y : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not contractions, left alone: an elementwise product (no reduction), a
// reduction whose body does more than multiply-add, and ops on tensors.
// CHECK-LABEL: func.func @not_contractions(
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @not_contractions(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>, %r: memref<4xf32>,
                            %ta: tensor<4x4xf32>, %tb: tensor<4x4xf32>, %tc: tensor<4x4xf32>) -> tensor<4x4xf32> {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %z, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%r : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %p = arith.mulf %x, %y : f32
    %e = math.exp %p : f32
    %s = arith.addf %z, %e : f32
    linalg.yield %s : f32
  }
  %m = linalg.matmul ins(%ta, %tb : tensor<4x4xf32>, tensor<4x4xf32>) outs(%tc : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

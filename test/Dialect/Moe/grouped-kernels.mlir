// RUN: switchyard-opt %s -split-input-file | FileCheck %s
// RUN: switchyard-opt %s -split-input-file | switchyard-opt -split-input-file | FileCheck %s
// RUN: switchyard-opt %s -split-input-file --mlir-print-op-generic | switchyard-opt -split-input-file | FileCheck %s
// RUN: switchyard-opt %s -split-input-file --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// The grouped kernels on tensors (one result) and on buffers (none).

// CHECK-LABEL: func.func @tensors
// CHECK: moe.grouped_matmul ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8xf32>, tensor<3x8x4xbf16>, tensor<?xindex>) outs(%{{.*}} : tensor<?x4xf32>) tile_size(16) -> tensor<?x4xf32>
// CHECK: moe.grouped_matmul ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<3x8x4xbf16>, tensor<?xindex>) outs(%{{.*}} : tensor<?x8xf32>) tile_size(16) transpose_weight -> tensor<?x8xf32>
// CHECK: moe.grouped_weight_grad ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8xf32>, tensor<?x4xf32>, tensor<4xindex>) outs(%{{.*}} : tensor<3x8x4xf32>) -> tensor<3x8x4xf32>
// BUF-LABEL: func.func @tensors
// BUF: moe.grouped_matmul ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<?x8xf32{{.*}}>, memref<3x8x4xbf16{{.*}}>, memref<?xindex{{.*}}>) outs(%[[P:.*]] : memref<?x4xf32{{.*}}>) tile_size(16){{$}}
// BUF: moe.grouped_weight_grad ins({{.*}}) outs(%[[DW:.*]] : memref<3x8x4xf32{{.*}}>){{$}}
func.func @tensors(%rows: tensor<?x8xf32>, %w: tensor<3x8x4xbf16>,
                   %te: tensor<?xindex>, %init: tensor<?x4xf32>,
                   %dinit: tensor<?x8xf32>, %seg: tensor<4xindex>,
                   %winit: tensor<3x8x4xf32>)
    -> (tensor<?x4xf32>, tensor<?x8xf32>, tensor<3x8x4xf32>) {
  %p = moe.grouped_matmul ins(%rows, %w, %te : tensor<?x8xf32>, tensor<3x8x4xbf16>, tensor<?xindex>) outs(%init : tensor<?x4xf32>) tile_size(16) -> tensor<?x4xf32>
  %d = moe.grouped_matmul ins(%p, %w, %te : tensor<?x4xf32>, tensor<3x8x4xbf16>, tensor<?xindex>) outs(%dinit : tensor<?x8xf32>) tile_size(16) transpose_weight -> tensor<?x8xf32>
  %dw = moe.grouped_weight_grad ins(%rows, %p, %seg : tensor<?x8xf32>, tensor<?x4xf32>, tensor<4xindex>) outs(%winit : tensor<3x8x4xf32>) -> tensor<3x8x4xf32>
  return %p, %d, %dw : tensor<?x4xf32>, tensor<?x8xf32>, tensor<3x8x4xf32>
}

// -----

// CHECK-LABEL: func.func @buffers
// CHECK: moe.grouped_matmul ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<32x8xf32>, memref<3x8x4xf32>, memref<2xindex>) outs(%{{.*}} : memref<32x4xf32>) tile_size(16){{$}}
// CHECK: moe.grouped_weight_grad ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<32x8xf32>, memref<32x4xf32>, memref<4xindex>) outs(%{{.*}} : memref<3x8x4xf32>){{$}}
func.func @buffers(%rows: memref<32x8xf32>, %w: memref<3x8x4xf32>,
                   %te: memref<2xindex>, %out: memref<32x4xf32>,
                   %seg: memref<4xindex>, %dw: memref<3x8x4xf32>) {
  moe.grouped_matmul ins(%rows, %w, %te : memref<32x8xf32>, memref<3x8x4xf32>, memref<2xindex>) outs(%out : memref<32x4xf32>) tile_size(16)
  moe.grouped_weight_grad ins(%rows, %out, %seg : memref<32x8xf32>, memref<32x4xf32>, memref<4xindex>) outs(%dw : memref<3x8x4xf32>)
  return
}

// -----

// Gathered operands: the rows read by route through `order`, with gates.
// CHECK-LABEL: func.func @gathered
// CHECK: moe.grouped_matmul ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8xf32>, tensor<3x8x4xbf16>, tensor<?xindex>) gather(%{{.*}} : tensor<?xindex>) routes_per_row(6) gates(%{{.*}} : tensor<?xf32>) outs(%{{.*}} : tensor<?x4xf32>) tile_size(16) -> tensor<?x4xf32>
// CHECK: moe.grouped_weight_grad ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8xf32>, tensor<?x4xf32>, tensor<4xindex>) gather(%{{.*}} : tensor<?xindex>) routes_per_row([6, 3]) rhs_gates(%{{.*}} : tensor<?xf32>) outs(%{{.*}} : tensor<3x8x4xf32>) -> tensor<3x8x4xf32>
// BUF-LABEL: func.func @gathered
// BUF: moe.grouped_matmul ins({{.*}}) gather(%{{.*}} : memref<?xindex{{.*}}>) routes_per_row(6) gates(%{{.*}} : memref<?xf32{{.*}}>) outs(%{{.*}} : memref<?x4xf32{{.*}}>) tile_size(16){{$}}
// BUF: moe.grouped_weight_grad ins({{.*}}) gather(%{{.*}} : memref<?xindex{{.*}}>) routes_per_row([6, 3]) rhs_gates(%{{.*}} : memref<?xf32{{.*}}>) outs(%{{.*}} : memref<3x8x4xf32{{.*}}>){{$}}
func.func @gathered(%x: tensor<?x8xf32>, %w: tensor<3x8x4xbf16>,
                    %te: tensor<?xindex>, %order: tensor<?xindex>,
                    %g: tensor<?xf32>, %init: tensor<?x4xf32>,
                    %dh: tensor<?x4xf32>, %seg: tensor<4xindex>,
                    %winit: tensor<3x8x4xf32>)
    -> (tensor<?x4xf32>, tensor<3x8x4xf32>) {
  %p = moe.grouped_matmul ins(%x, %w, %te : tensor<?x8xf32>, tensor<3x8x4xbf16>, tensor<?xindex>) gather(%order : tensor<?xindex>) routes_per_row(6) gates(%g : tensor<?xf32>) outs(%init : tensor<?x4xf32>) tile_size(16) -> tensor<?x4xf32>
  %dw = moe.grouped_weight_grad ins(%x, %dh, %seg : tensor<?x8xf32>, tensor<?x4xf32>, tensor<4xindex>) gather(%order : tensor<?xindex>) routes_per_row([6, 3]) rhs_gates(%g : tensor<?xf32>) outs(%winit : tensor<3x8x4xf32>) -> tensor<3x8x4xf32>
  return %p, %dw : tensor<?x4xf32>, tensor<3x8x4xf32>
}

// -----

// The routes' sort, on tensors (four results) and bufferized (none).
// CHECK-LABEL: func.func @sort_routes
// CHECK: moe.sort_routes ins(%{{.*}} : tensor<?x2x3xi32>) outs(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>) experts_per_head(5) tile_size(64) -> tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>
// BUF-LABEL: func.func @sort_routes
// BUF: moe.sort_routes ins(%{{.*}} : memref<?x2x3xi32{{.*}}>) outs(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<11xindex{{.*}}>, memref<?xindex{{.*}}>, memref<?x2x3xindex{{.*}}>, memref<?xindex{{.*}}>) experts_per_head(5) tile_size(64){{$}}
func.func @sort_routes(%i: tensor<?x2x3xi32>, %s: tensor<11xindex>,
                       %o: tensor<?xindex>, %l: tensor<?x2x3xindex>,
                       %t: tensor<?xindex>)
    -> (tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>) {
  %r:4 = moe.sort_routes ins(%i : tensor<?x2x3xi32>) outs(%s, %o, %l, %t : tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>) experts_per_head(5) tile_size(64) -> tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>
  return %r#0, %r#1, %r#2, %r#3 : tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>
}

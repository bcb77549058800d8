// RUN: switchyard-opt %s --convert-moe-to-linalg=grouped-experts | FileCheck %s
// RUN: switchyard-opt %s --convert-moe-to-linalg=grouped-experts --switchyard-cpu-pipeline -o /dev/null
// RUN: switchyard-opt %s --convert-moe-to-linalg="grouped-experts grouped-tile-rows=16" --canonicalize | FileCheck %s --check-prefix=PADDED
// RUN: switchyard-opt %s --convert-moe-to-linalg="grouped-experts grouped-tile-rows=16" --switchyard-cpu-pipeline -o /dev/null
// RUN: not switchyard-opt %s --convert-moe-to-linalg="grouped-experts grouped-tile-rows=-1" 2>&1 | FileCheck %s --check-prefix=BADTILE
// BADTILE: convert-moe-to-linalg: grouped-tile-rows must be 0 or positive, found -1

// The padded formulation (grouped-tile-rows, the GPU's): no host reads.
// PADDED-LABEL: func.func @proj
// The sort: R = 6 routes per token; P = (ceil(R / 16) + 10) * 16 positions,
// one per 16-row tile's expert; segments of the 10 expert rows.
// PADDED: %[[R:.*]] = arith.muli %{{.*}}, %c6
// PADDED: %[[TILES:.*]] = arith.addi %{{.*}}, %c10
// PADDED: %[[P:.*]] = arith.muli %[[TILES]], %c16
// PADDED: %[[SORTED:.*]]:4 = moe.sort_routes ins(%arg3 : tensor<?x2x3xi32>) outs({{.*}} : tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>) experts_per_head(5) tile_size(16)
// The kernel reads each route's row of x where it lies: no scattered copy.
// PADDED-NOT: scf.forall
// PADDED: %[[PRODUCT:.*]] = moe.grouped_matmul ins(%arg0, %arg1, %[[SORTED]]#3 : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?xindex>) gather(%[[SORTED]]#1 : tensor<?xindex>) routes_per_row(6) outs(%{{.*}} : tensor<?x8xf32>) tile_size(16) -> tensor<?x8xf32>
// The gated sum over each head's routes, read at their slots.
// PADDED: linalg.generic {{.*}}ins(%[[SORTED]]#2, %arg2 : tensor<?x2x3xindex>, tensor<?x2x3xf32>)
// PADDED: tensor.extract %[[PRODUCT]]
// The gradients gather as well: by token (6 routes per row of x and dy),
// by head (3 per row of the [N·2, 8] views of dv and v), with the gates
// of the factor the forward pass gated; each gate gradient reads its
// route's row where it lies and the product's row at the route's slot.
// PADDED-LABEL: func.func @grads
// PADDED-NOT: scf.forall ({{.*}}) in ({{.*}}, 2, 3, {{8|16}})
// PADDED: %[[DV:.*]] = tensor.collapse_shape %arg5 {{\[\[}}0, 1], [2]] : tensor<?x2x8xf32> into tensor<?x8xf32>
// PADDED: %[[DX:.*]] = moe.grouped_matmul ins(%[[DV]], %arg1, %{{.*}}) gather(%[[ORDERV:.*]] : tensor<?xindex>) routes_per_row(3) outs({{.*}}) tile_size(16) transpose_weight
// PADDED: moe.grouped_weight_grad ins(%arg0, %{{.*}}, %{{.*}} : tensor<?x16xf32>, tensor<?x8xf32>, tensor<11xindex>) gather(%[[ORDERV]] : tensor<?xindex>) routes_per_row([6, 3]) rhs_gates(%{{.*}} : tensor<?xf32>)
// PADDED: linalg.generic {{.*}}ins(%arg0, %[[SLOTSV:.*]] : tensor<?x16xf32>, tensor<?x2x3xindex>)
// PADDED: tensor.extract %[[DX]]
// PADDED: moe.grouped_matmul ins(%arg7, %arg2, %{{.*}}) gather(%{{.*}} : tensor<?xindex>) routes_per_row(6) outs({{.*}}) tile_size(16) transpose_weight
// PADDED: moe.grouped_weight_grad ins(%{{.*}}, %arg7, %{{.*}} : tensor<?x8xf32>, tensor<?x16xf32>, tensor<11xindex>) gather(%{{.*}} : tensor<?xindex>) routes_per_row([3, 6]) lhs_gates(%{{.*}} : tensor<?xf32>)

// The grouped (CVMM) formulation of the expert projections: the routes
// sorted by expert (offsets, then a counting sort), one matmul per expert
// on its block of rows, the products summed back over the routes. 2 heads
// of 5 experts: 10 expert matrices.

// CHECK-LABEL: func.func @proj
// Each expert's first sorted position: #routes whose expert h·E + e is below.
// CHECK: %[[OFFSETS:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "reduction", "reduction"]{{.*}} outs({{.*}} : tensor<?xindex>)
// CHECK: arith.cmpi ult
// The counting sort: a cursor per expert, each route's slot, each slot's route.
// CHECK: %[[SORT:.*]]:3 = scf.for {{.*}} iter_args({{.*}}) -> (tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>)
// One matmul per expert on rows [offsets[e], offsets[e + 1]), gathered
// row by row in the loop; the experts are independent (scf.forall, each
// writing its own rows: on the CPU, in parallel).
// CHECK: %[[P:.*]] = scf.forall (%[[E:[a-z0-9_]+]]) in (10) shared_outs(%[[OUT:.*]] = %{{.*}})
// CHECK: %[[BEGIN:.*]] = tensor.extract %[[OFFSETS]][%[[E]]]
// CHECK: %[[COUNT:.*]] = arith.subi
// CHECK: scf.for {{.*}} to %[[COUNT]]
// CHECK: tensor.extract %[[SORT]]#2
// CHECK: tensor.extract_slice %arg0[{{.*}}, 0] [1, 16] [1, 1] : tensor<?x16xf32> to tensor<16xf32>
// CHECK: tensor.extract_slice %arg1[%[[E]], 0, 0] [1, 16, 8] [1, 1, 1] : tensor<10x16x8xf32> to tensor<16x8xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} ins({{.*}} : tensor<?x16xf32>, tensor<16x8xf32>)
// CHECK: scf.forall.in_parallel
// CHECK-NEXT: tensor.parallel_insert_slice {{.*}} into %[[OUT]][%[[BEGIN]], 0] [%[[COUNT]], 8]
// The gated sum over each head's routes, read at their slots.
// CHECK: linalg.generic {{.*}}ins(%[[SORT]]#1, %arg2 : tensor<?x2x3xindex>, tensor<?x2x3xf32>)
// CHECK: tensor.extract %[[P]]
// CHECK-NOT: moe.
func.func @proj(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) -> tensor<?x2x8xf32> {
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x8xf32>
  return %p : tensor<?x2x8xf32>
}

// The gradients: per expert, dX = dout · W[e]ᵀ (the weight read
// transposed) and dW[e] = Xᵀ · (g · dout) over the expert's rows, written
// into the weight gradient's row e; no dense [N, H, E, F] tensor.
// CHECK-LABEL: func.func @grads
// CHECK-NOT: tensor<?x2x5x8xf32>
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]} ins({{.*}} : tensor<?x8xf32>, tensor<16x8xf32>) outs({{.*}} : tensor<?x16xf32>)
// CHECK: tensor.parallel_insert_slice {{.*}} : tensor<16x8xf32> into tensor<?x16x8xf32>
// CHECK-NOT: moe.
func.func @grads(%x: tensor<?x16xf32>, %wv: tensor<10x16x8xf32>, %wo: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dv: tensor<?x2x8xf32>, %v: tensor<?x2x8xf32>, %dy: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>) {
  %dx, %dwv, %dgv = moe.expert_proj_grad %x, %wv, %g, %i, %dv : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>
  %do, %dwo, %dgo = moe.expert_merge_grad %v, %wo, %g, %i, %dy : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x16xf32> -> tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>
  return %dx, %dwv, %dgv, %do, %dwo, %dgo : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>
}

// With a dynamic choice count the kernels cannot take the rows by route
// (routes_per_row is static): the rows are scattered into the padded order,
// one element per iteration, and the kernel reads them there.
// PADDED-LABEL: func.func @dynamic_choices
// PADDED: %[[SORT:.*]]:4 = moe.sort_routes ins(%arg3 : tensor<?x2x?xi32>)
// PADDED: %[[ROWS:.*]] = scf.forall (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 2, %{{.*}}, 16)
// PADDED: tensor.parallel_insert_slice
// PADDED: moe.grouped_matmul ins(%[[ROWS]], %arg1, %[[SORT]]#3 : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?xindex>) outs(
// PADDED-NOT: gather
func.func @dynamic_choices(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x?xf32>, %i: tensor<?x2x?xi32>) -> tensor<?x2x8xf32> {
  %h = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x?xf32>, tensor<?x2x?xi32> -> tensor<?x2x8xf32>
  return %h : tensor<?x2x8xf32>
}

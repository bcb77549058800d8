// RUN: switchyard-opt %s --convert-moe-to-linalg | FileCheck %s
// RUN: switchyard-opt %s --convert-moe-to-linalg --switchyard-cpu-pipeline -o /dev/null
// RUN: switchyard-opt %s --convert-moe-to-linalg="fused-expert-tile-rows=8 fused-router-matmul" --canonicalize | FileCheck %s --check-prefix=GROUPED
// RUN: switchyard-opt %s --convert-moe-to-linalg="fused-expert-tile-rows=8 fused-router-matmul" --switchyard-cpu-pipeline -o /dev/null
// RUN: not switchyard-opt %s --convert-moe-to-linalg="fused-expert-tile-rows=-1" 2>&1 | FileCheck %s --check-prefix=BADTILE

// BADTILE: convert-moe-to-linalg: fused-expert-tile-rows must be 0 or positive, found -1

// The CPU's forms (FusedKernelForms::cpu): the router's logits one matmul
// that its row kernel reads; the expert ops in the grouped formulation,
// the routes sorted into segments of 8 rows, the kernels gathering their
// rows by route (no gathered copy), the gradients' products with the
// transposed weight and the weight gradient per expert.
// GROUPED-LABEL: func.func @router
// GROUPED: %[[LOGITS:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<?x10xf32>)
// GROUPED: scf.forall
// GROUPED:   vector.transfer_read %[[LOGITS]]
// GROUPED-LABEL: func.func @proj(
// GROUPED: %[[SORT:.*]]:4 = moe.sort_routes {{.*}} experts_per_head(5) tile_size(8)
// GROUPED: moe.grouped_matmul ins(%arg0, %arg1, %[[SORT]]#3 : {{.*}}) gather(%[[SORT]]#1 : tensor<?xindex>) routes_per_row(6) outs({{.*}}) tile_size(8)
// GROUPED-LABEL: func.func @merge(
// GROUPED: moe.grouped_matmul {{.*}} routes_per_row(3) gates({{.*}}) outs({{.*}}) tile_size(8)
// GROUPED-LABEL: func.func @proj_grad
// GROUPED: moe.grouped_matmul {{.*}} routes_per_row(3) outs({{.*}}) tile_size(8) transpose_weight
// GROUPED: moe.grouped_weight_grad {{.*}} routes_per_row([6, 3]) rhs_gates
// GROUPED-LABEL: func.func @merge_grad
// GROUPED: moe.grouped_matmul {{.*}} tile_size(8) transpose_weight
// GROUPED: moe.grouped_weight_grad {{.*}} routes_per_row([3, 6]) lhs_gates

// Each fused op is ONE row kernel: an scf.forall on tensors over scalars and
// vectors, with no tensor created inside it and no linalg op at all.

// The router: one iteration per (token, head); the E dot products in one
// pass over the token's features (a vector<5xf32> of accumulators: each
// feature read once, five weights gathered), then the sigmoid and a running
// top-k of k = 3 slots (three f32 keys, three f32 values, three indices)
// and the score vector, carried through the expert loop.
// CHECK-LABEL: func.func @router
// CHECK-NOT: linalg.
// CHECK: %[[R:.*]]:3 = scf.forall (%[[N:.*]], %[[H:.*]]) in (%{{.*}}, 2) shared_outs(%[[VO:.*]] = %{{.*}}, %[[IO:.*]] = %{{.*}}, %[[SO:.*]] = %{{.*}}) -> (tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>)
// CHECK-NOT: tensor.empty
// CHECK: %[[DOTS:.*]] = scf.for {{.*}} -> (vector<5xf32>)
// CHECK-COUNT-1: tensor.extract %{{.*}}[%[[N]], %{{.*}}] : tensor<?x16xf32>
// CHECK-COUNT-5: tensor.extract %{{.*}} : tensor<10x16xf32>
// CHECK: vector.from_elements {{.*}} : vector<5xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, index, index, index, vector<5xf32>)
// CHECK: vector.extract %[[DOTS]][%{{.*}}] : f32 from vector<5xf32>
// CHECK: math.exp
// CHECK: tensor.extract %{{.*}}[%[[N]], %[[H]], %{{.*}}] : tensor<?x2x5xi1>
// CHECK: arith.cmpf ogt
// CHECK: vector.insert
// CHECK: vector.from_elements {{.*}} : vector<3xf32>
// CHECK: vector.transfer_write
// CHECK: scf.forall.in_parallel
// CHECK-COUNT-3: tensor.parallel_insert_slice
// CHECK-NOT: scf.forall
// CHECK-NOT: moe.
func.func @router(%x: tensor<?x16xf32>, %w: tensor<10x16xf32>, %m: tensor<?x2x5xi1>) -> (tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>) {
  %v, %i, %s = moe.fused_router %x, %w k(3) mask(%m) : tensor<?x16xf32>, tensor<10x16xf32>, tensor<?x2x5xi1> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
  return %v, %i, %s : tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
}

// Unused scores are not written: two shared outputs only.
// CHECK-LABEL: func.func @router_no_scores
// CHECK: scf.forall (%{{.*}}) in (%{{.*}}) shared_outs(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<?x2xf32>, tensor<?x2xi64>)
// CHECK-NOT: vector.insert
func.func @router_no_scores(%x: tensor<?x16xbf16>, %w: tensor<8x16xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi64>) {
  %v, %i, %s = moe.fused_router %x, %w k(2) : tensor<?x16xbf16>, tensor<8x16xbf16> -> tensor<?x2xf32>, tensor<?x2xi64>, tensor<?x8xf32>
  return %v, %i : tensor<?x2xf32>, tensor<?x2xi64>
}

// The V projection: one iteration per (token, head); a vector<8xf32>
// accumulator over the routes, each route's projection gathered from the
// selected expert matrix row by row; no [N, H, K, F] tensor.
// CHECK-LABEL: func.func @proj
// CHECK-NOT: linalg.
// CHECK-NOT: tensor<?x2x3x8xf32>
// CHECK: scf.forall (%[[N:.*]], %[[H:.*]]) in (%{{.*}}, 2) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<?x2x8xf32>)
// CHECK: scf.for {{.*}} -> (vector<8xf32>)
// CHECK: tensor.extract %{{.*}}[%[[N]], %[[H]], %{{.*}}] : tensor<?x2x3xi32>
// CHECK: scf.for {{.*}} -> (vector<8xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<10x16x8xf32>, vector<8xf32>
// CHECK: vector.broadcast
// CHECK: tensor.extract %{{.*}}[%[[N]], %[[H]], %{{.*}}] : tensor<?x2x3xf32>
// CHECK: tensor.parallel_insert_slice
// CHECK-NOT: scf.forall
// CHECK-NOT: tensor<?x2x3x8xf32>
func.func @proj(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) -> tensor<?x2x8xf32> {
  %v = moe.fused_expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x8xf32>
  return %v : tensor<?x2x8xf32>
}

// The O projection over a 100-wide model: one iteration per (token, chunk
// of 32 columns), the routes of both heads reduced in registers; f16
// weights are read as f16 vectors and extended. 100 = 3·32 + 4: the last
// chunk reads past the row (a masked read, no in_bounds) into a result
// padded to 128 columns, sliced back to 100.
// CHECK-LABEL: func.func @merge
// CHECK-NOT: linalg.
// CHECK: scf.forall (%{{.*}}, %[[C:.*]]) in (%{{.*}}, 4) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<?x128xf16>)
// CHECK: arith.muli %[[C]], %{{.*}} : index
// CHECK: scf.for {{.*}} -> (vector<32xf32>)
// CHECK: scf.for {{.*}} -> (vector<32xf32>)
// CHECK: vector.transfer_read {{.*}}, %{{[^ ]*}} : tensor<10x8x100xf16>, vector<32xf16>
// CHECK: arith.extf {{.*}} : vector<32xf16> to vector<32xf32>
// CHECK: arith.truncf {{.*}} : vector<32xf32> to vector<32xf16>
// CHECK: tensor.parallel_insert_slice {{.*}} [1, 32] [1, 1] : tensor<1x32xf16> into tensor<?x128xf16>
// CHECK-NOT: scf.forall
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [%{{.*}}, 100] [1, 1] : tensor<?x128xf16> to tensor<?x100xf16>
func.func @merge(%o: tensor<?x2x8xf16>, %w: tensor<10x8x100xf16>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) -> tensor<?x100xf16> {
  %y = moe.fused_expert_merge %o, %w, %g, %i : tensor<?x2x8xf16>, tensor<10x8x100xf16>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x100xf16>
  return %y : tensor<?x100xf16>
}

// The V gradient: four row kernels and nothing else, none of them with the
// route sums C [N, H·E, F] (tensor<?x10x8xf32>) or a per-route tensor.
// dx: one iteration per (token, chunk of 16 of the 96 model columns),
// summing over heads and routes, per column a dot product of dv's row with
// the weight's row (contiguous, vectors of the 8 head columns).
// CHECK-LABEL: func.func @proj_grad
// CHECK-NOT: linalg.
// CHECK-NOT: tensor<?x10x8xf32>
// CHECK-NOT: tensor<?x2x3x8xf32>
// CHECK: scf.forall (%[[N:.*]], %[[C:.*]]) in (%{{.*}}, 6) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<?x96xf32>)
// CHECK: scf.for {{.*}} -> (vector<16xf32>)
// CHECK: scf.for {{.*}} -> (vector<16xf32>)
// CHECK: tensor.extract %{{.*}}[%[[N]], %{{.*}}, %{{.*}}] : tensor<?x2x3xi32>
// CHECK: scf.for {{.*}} -> (vector<16xf32>)
// CHECK: arith.minui
// CHECK: scf.for {{.*}} -> (vector<8xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<?x2x8xf32>, vector<8xf32>
// CHECK: vector.transfer_read {{.*}} : tensor<10x96x8xf32>, vector<8xf32>
// CHECK: vector.fma
// CHECK: vector.reduction <add>
// CHECK: vector.insert
// CHECK: tensor.parallel_insert_slice {{.*}} [1, 16] [1, 1] : tensor<1x16xf32> into tensor<?x96xf32>
// The routing coefficients c[n, h·E + e] (summed gates of the routes that
// picked the expert), one iteration per token.
// CHECK: scf.forall (%{{.*}}) in (%{{.*}}) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<?x10xf32>)
// CHECK: vector.insert {{.*}} : f32 into vector<10xf32>
// dW: one iteration per (expert row, model column, chunk of head columns),
// scanning the tokens and skipping those not routed to the row.
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (10, 96, 1) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<10x96x8xf32>)
// CHECK: arith.divui
// CHECK: scf.for {{.*}} -> (vector<8xf32>)
// CHECK: tensor.extract %{{.*}} : tensor<?x10xf32>
// CHECK: arith.cmpf une
// CHECK: scf.if {{.*}} -> (vector<8xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<?x2x8xf32>, vector<8xf32>
// CHECK: tensor.parallel_insert_slice {{.*}} [1, 1, 8] [1, 1, 1] : tensor<1x1x8xf32> into tensor<10x96x8xf32>
// dg: one iteration per route, the route's projection dotted with dv.
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 2, 3) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<?x2x3xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<10x96x8xf32>, vector<8xf32>
// CHECK: vector.reduction <add>
// CHECK: tensor.parallel_insert_slice {{.*}} [1, 1, 1] [1, 1, 1] : tensor<1x1x1xf32> into tensor<?x2x3xf32>
// CHECK-NOT: scf.forall (
// CHECK-NOT: tensor<?x10x8xf32>
// CHECK-NOT: linalg.
func.func @proj_grad(%x: tensor<?x96xf32>, %w: tensor<10x96x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dv: tensor<?x2x8xf32>) -> (tensor<?x96xf32>, tensor<10x96x8xf32>, tensor<?x2x3xf32>) {
  %dx, %dw, %dg = moe.fused_expert_proj_grad %x, %w, %g, %i, %dv : tensor<?x96xf32>, tensor<10x96x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<?x96xf32>, tensor<10x96x8xf32>, tensor<?x2x3xf32>
  return %dx, %dw, %dg : tensor<?x96xf32>, tensor<10x96x8xf32>, tensor<?x2x3xf32>
}

// The O gradient with f16 operands: dheads per (token, head, chunk of head
// columns), the routes of that head only, each column a dot product over
// the 96 model columns in 3 vectors of 32; dW per (expert row, head column,
// chunk of 32 of the 96 model columns); dg per route. Results are
// truncated to f16 (the gates' gradient stays f32).
// CHECK-LABEL: func.func @merge_grad
// CHECK-NOT: linalg.
// CHECK-NOT: tensor<?x10x8xf32>
// CHECK-NOT: tensor<?x2x3x96xf32>
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 2, 1) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<?x2x8xf16>)
// CHECK: scf.for {{.*}} -> (vector<8xf32>)
// CHECK: scf.for {{.*}} -> (vector<32xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<?x96xf16>, vector<32xf16>
// CHECK: arith.truncf {{.*}} : vector<8xf32> to vector<8xf16>
// CHECK: scf.forall (%{{.*}}) in (%{{.*}}) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<?x10xf32>)
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (10, 8, 3) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<10x8x96xf16>)
// CHECK: vector.transfer_read {{.*}} : tensor<?x96xf16>, vector<32xf16>
// CHECK: arith.truncf {{.*}} : vector<32xf32> to vector<32xf16>
// CHECK: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 2, 3) shared_outs(%{{.*}} = %{{.*}}) -> (tensor<?x2x3xf32>)
// CHECK: vector.reduction <add>
func.func @merge_grad(%o: tensor<?x2x8xf16>, %w: tensor<10x8x96xf16>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dy: tensor<?x96xf16>) -> (tensor<?x2x8xf16>, tensor<10x8x96xf16>, tensor<?x2x3xf32>) {
  %do, %dw, %dg = moe.fused_expert_merge_grad %o, %w, %g, %i, %dy : tensor<?x2x8xf16>, tensor<10x8x96xf16>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x96xf16> -> tensor<?x2x8xf16>, tensor<10x8x96xf16>, tensor<?x2x3xf32>
  return %do, %dw, %dg : tensor<?x2x8xf16>, tensor<10x8x96xf16>, tensor<?x2x3xf32>
}

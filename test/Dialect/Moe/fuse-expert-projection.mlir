// RUN: switchyard-opt %s --moe-fuse-expert-projection | FileCheck %s
// RUN: switchyard-opt %s --moe-fuse-expert-projection | switchyard-opt | FileCheck %s

// V and O projections become their one-kernel forms, same operands.
// CHECK-LABEL: func.func @projections
// CHECK-SAME: (%[[X:.*]]: tensor<?x16xf32>, %[[WV:.*]]: tensor<10x16x8xf32>, %[[WO:.*]]: tensor<10x8x16xf32>, %[[G:.*]]: tensor<?x2x3xf32>, %[[I:.*]]: tensor<?x2x3xi32>)
// CHECK: %[[V:.*]] = moe.fused_expert_proj %[[X]], %[[WV]], %[[G]], %[[I]] : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x8xf32>
// CHECK: %[[Y:.*]] = moe.fused_expert_merge %[[V]], %[[WO]], %[[G]], %[[I]] : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x16xf32>
// CHECK-NOT: moe.expert_proj
// CHECK-NOT: moe.expert_merge
// CHECK: return %[[Y]]
func.func @projections(%x: tensor<?x16xf32>, %wv: tensor<10x16x8xf32>, %wo: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) -> tensor<?x16xf32> {
  %v = moe.expert_proj %x, %wv, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x8xf32>
  %y = moe.expert_merge %v, %wo, %g, %i : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// A dynamic accumulated width (the kernel's vector) stays unfused.
// CHECK-LABEL: func.func @dynamic_width
// CHECK: moe.expert_proj
// CHECK-NOT: moe.fused_expert_proj
func.func @dynamic_width(%x: tensor<?x16xf32>, %wv: tensor<10x16x?xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) -> tensor<?x2x?xf32> {
  %v = moe.expert_proj %x, %wv, %g, %i : tensor<?x16xf32>, tensor<10x16x?xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x?xf32>
  return %v : tensor<?x2x?xf32>
}

// The gradients of both projections become their fused forms, same operands
// and results.
// CHECK-LABEL: func.func @gradients
// CHECK-SAME: (%[[X:.*]]: tensor<?x16xf32>, %[[WV:.*]]: tensor<10x16x8xf32>, %[[WO:.*]]: tensor<10x8x16xf32>, %[[G:.*]]: tensor<?x2x3xf32>, %[[I:.*]]: tensor<?x2x3xi32>, %[[V:.*]]: tensor<?x2x8xf32>, %[[DY:.*]]: tensor<?x16xf32>)
// CHECK: %[[DV:.*]], %[[DWO:.*]], %[[DGO:.*]] = moe.fused_expert_merge_grad %[[V]], %[[WO]], %[[G]], %[[I]], %[[DY]] : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x16xf32> -> tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>
// CHECK: %[[DX:.*]], %[[DWV:.*]], %[[DGV:.*]] = moe.fused_expert_proj_grad %[[X]], %[[WV]], %[[G]], %[[I]], %[[DV]] : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>
// CHECK-NOT: moe.expert_proj_grad
// CHECK-NOT: moe.expert_merge_grad
// CHECK: return %[[DX]], %[[DWV]], %[[DGV]], %[[DWO]], %[[DGO]]
func.func @gradients(%x: tensor<?x16xf32>, %wv: tensor<10x16x8xf32>, %wo: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %v: tensor<?x2x8xf32>, %dy: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>) {
  %dv, %dwo, %dgo = moe.expert_merge_grad %v, %wo, %g, %i, %dy : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x16xf32> -> tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>
  %dx, %dwv, %dgv = moe.expert_proj_grad %x, %wv, %g, %i, %dv : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>
  return %dx, %dwv, %dgv, %dwo, %dgo : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>
}

// A gradient whose expert weight has a dynamic width stays unfused.
// CHECK-LABEL: func.func @gradient_dynamic_width
// CHECK: moe.expert_proj_grad
// CHECK-NOT: moe.fused_expert_proj_grad
func.func @gradient_dynamic_width(%x: tensor<?x?xf32>, %wv: tensor<10x?x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dv: tensor<?x2x8xf32>) -> (tensor<?x?xf32>, tensor<10x?x8xf32>, tensor<?x2x3xf32>) {
  %dx, %dwv, %dgv = moe.expert_proj_grad %x, %wv, %g, %i, %dv : tensor<?x?xf32>, tensor<10x?x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<?x?xf32>, tensor<10x?x8xf32>, tensor<?x2x3xf32>
  return %dx, %dwv, %dgv : tensor<?x?xf32>, tensor<10x?x8xf32>, tensor<?x2x3xf32>
}

// RUN: switchyard-opt %s | FileCheck %s
// RUN: switchyard-opt %s | switchyard-opt | FileCheck %s
// RUN: switchyard-opt %s --mlir-print-op-generic | switchyard-opt | FileCheck %s

// The SwitchHead routing of one attention layer: both routers, both top-ks
// (one with an expert-dropout mask), the value and the output projections.
// CHECK-LABEL: func.func @switchhead_routing
// CHECK-SAME: (%[[X:.*]]: tensor<?x128xf32>, %[[WS:.*]]: tensor<10x128xf32>, %[[WV:.*]]: tensor<10x128x32xf32>, %[[WO:.*]]: tensor<10x32x128xf32>, %[[M:.*]]: tensor<?x2x5xi1>)
func.func @switchhead_routing(%x: tensor<?x128xf32>, %w_sel: tensor<10x128xf32>,
                              %w_v: tensor<10x128x32xf32>,
                              %w_o: tensor<10x32x128xf32>,
                              %drop: tensor<?x2x5xi1>) -> tensor<?x128xf32> {
  // CHECK: %[[S:.*]] = moe.gate %[[X]], %[[WS]] : tensor<?x128xf32>, tensor<10x128xf32> -> tensor<?x2x5xf32>
  %s = moe.gate %x, %w_sel : tensor<?x128xf32>, tensor<10x128xf32> -> tensor<?x2x5xf32>
  // CHECK: %[[V:.*]], %[[I:.*]] = moe.topk %[[S]] k(3) : tensor<?x2x5xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>
  %v, %i = moe.topk %s k(3) : tensor<?x2x5xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>
  // CHECK: %[[MV:.*]], %[[MI:.*]] = moe.topk %[[S]] k(3) mask(%[[M]]) : tensor<?x2x5xf32>, tensor<?x2x5xi1> -> tensor<?x2x3xf32>, tensor<?x2x3xi64>
  %mv, %mi = moe.topk %s k(3) mask(%drop) : tensor<?x2x5xf32>, tensor<?x2x5xi1> -> tensor<?x2x3xf32>, tensor<?x2x3xi64>
  // CHECK: %[[P:.*]] = moe.expert_proj %[[X]], %[[WV]], %[[V]], %[[I]] : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x32xf32>
  %p = moe.expert_proj %x, %w_v, %v, %i : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x32xf32>
  // CHECK: %[[Y:.*]] = moe.expert_merge %[[P]], %[[WO]], %[[MV]], %[[MI]] : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi64> -> tensor<?x128xf32>
  %y = moe.expert_merge %p, %w_o, %mv, %mi : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi64> -> tensor<?x128xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<?x128xf32>
}

// A sigma-MoE feed-forward in bf16: a flat [N, E] router (scores stay f32),
// top-2, and the expert MLP.
// CHECK-LABEL: func.func @sigma_moe_bf16
func.func @sigma_moe_bf16(%x: tensor<7x64xbf16>, %w_sel: tensor<8x64xbf16>,
                          %up: tensor<8x64x16xbf16>,
                          %down: tensor<8x16x64xbf16>) -> tensor<7x64xbf16> {
  // CHECK: %[[S:.*]] = moe.gate %{{.*}}, %{{.*}} : tensor<7x64xbf16>, tensor<8x64xbf16> -> tensor<7x8xf32>
  %s = moe.gate %x, %w_sel : tensor<7x64xbf16>, tensor<8x64xbf16> -> tensor<7x8xf32>
  // CHECK: %[[G:.*]], %[[I:.*]] = moe.topk %[[S]] k(2) : tensor<7x8xf32> -> tensor<7x2xf32>, tensor<7x2xi32>
  %g, %i = moe.topk %s k(2) : tensor<7x8xf32> -> tensor<7x2xf32>, tensor<7x2xi32>
  // CHECK: moe.expert_mlp %{{.*}}, %{{.*}}, %{{.*}}, %[[G]], %[[I]] : tensor<7x64xbf16>, tensor<8x64x16xbf16>, tensor<8x16x64xbf16>, tensor<7x2xf32>, tensor<7x2xi32> -> tensor<7x64xbf16>
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<7x64xbf16>, tensor<8x64x16xbf16>, tensor<8x16x64xbf16>, tensor<7x2xf32>, tensor<7x2xi32> -> tensor<7x64xbf16>
  return %y : tensor<7x64xbf16>
}

// Edge cases the verifiers must accept: k = E, k = 1, a single token, one
// expert per head, and fully dynamic weights (nothing to check statically).
// CHECK-LABEL: func.func @edges
func.func @edges(%s: tensor<1x4xf32>, %x: tensor<1x8xf16>,
                 %w: tensor<?x8x4xf16>, %g: tensor<1x3x1xf32>,
                 %i: tensor<1x3x1xi64>) -> tensor<1x3x4xf16> {
  // CHECK: moe.topk %{{.*}} k(4) : tensor<1x4xf32> -> tensor<1x4xf32>, tensor<1x4xi32>
  %v4, %i4 = moe.topk %s k(4) : tensor<1x4xf32> -> tensor<1x4xf32>, tensor<1x4xi32>
  // CHECK: moe.topk %{{.*}} k(1) : tensor<1x4xf32> -> tensor<1x1xf32>, tensor<1x1xi32>
  %v1, %i1 = moe.topk %s k(1) : tensor<1x4xf32> -> tensor<1x1xf32>, tensor<1x1xi32>
  // CHECK: moe.expert_proj {{.*}} -> tensor<1x3x4xf16>
  %p = moe.expert_proj %x, %w, %g, %i : tensor<1x8xf16>, tensor<?x8x4xf16>, tensor<1x3x1xf32>, tensor<1x3x1xi64> -> tensor<1x3x4xf16>
  return %p : tensor<1x3x4xf16>
}

// The attention core, without and with Transformer-XL relative keys (the
// keys then also cover a memory block: S = 32 > T = 16).
// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<?x16x2x8xf32>, %k: tensor<?x32x2x8xf32>,
                     %v: tensor<?x32x2x8xf32>, %r: tensor<32x2x8xf32>)
    -> (tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>) {
  // CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>
  %q16 = tensor.extract_slice %k[0, 16, 0, 0] [1, 16, 2, 8] [1, 1, 1, 1] : tensor<?x32x2x8xf32> to tensor<1x16x2x8xf32>
  %c = tensor.cast %q16 : tensor<1x16x2x8xf32> to tensor<?x16x2x8xf32>
  %o = moe.attention %q, %c, %c : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>
  // CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}} rel(%{{.*}} : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x16x2x8xf32>
  %x = moe.attention %q, %k, %v rel(%r : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x16x2x8xf32>
  // Their weights, [batch, heads, queries, keys], for analysis.
  // CHECK: moe.attention_weights %{{.*}}, %{{.*}} rel(%{{.*}} : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x2x16x32xf32>
  %w = moe.attention_weights %q, %k rel(%r : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x2x16x32xf32>
  // A decoding step: the queries start at key %p of a cache.
  // CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}} at %{{.*}} : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x16x2x8xf32>
  %p = arith.constant 3 : index
  %y = moe.attention %q, %k, %v at %p : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x16x2x8xf32>
  return %o, %x : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>
}

// The gradient of attention, and the flash-attention ops of
// moe-fuse-attention, without and with relative keys and XL memory.
// CHECK-LABEL: func.func @attention_gradients
func.func @attention_gradients(%q: tensor<?x16x2x8xf32>, %k: tensor<?x32x2x8xf32>,
                               %v: tensor<?x32x2x8xf32>, %r: tensor<32x2x8xf32>,
                               %do: tensor<?x16x2x8xf32>)
    -> (tensor<?x16x2x8xf32>, tensor<32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<32x2x8xf32>) {
  // CHECK: moe.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>
  %dq, %dk, %dv = moe.attention_grad %q, %q, %q, %do : tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2x8xf32>
  // CHECK: moe.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} rel(%{{.*}} : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<32x2x8xf32>
  %gq, %gk, %gv, %gr = moe.attention_grad %q, %k, %v, %do rel(%r : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<32x2x8xf32>
  // CHECK: moe.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} at %{{.*}} : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>
  %at = arith.constant 2 : index
  %aq, %ak, %av = moe.attention_grad %q, %k, %v, %do at %at : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>
  // CHECK: %[[O:.*]], %[[LSE:.*]] = moe.flash_attention %{{.*}}, %{{.*}}, %{{.*}} rel(%{{.*}} : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2xf32>
  %o, %lse = moe.flash_attention %q, %k, %v rel(%r : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x16x2xf32>
  // CHECK: moe.flash_attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[LSE]], %{{.*}} rel(%{{.*}} : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<32x2x8xf32>
  %fq, %fk, %fv, %fr = moe.flash_attention_grad %q, %k, %v, %o, %lse, %do rel(%r : tensor<32x2x8xf32>) : tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x16x2x8xf32>, tensor<?x16x2xf32>, tensor<?x16x2x8xf32> -> tensor<?x16x2x8xf32>, tensor<?x32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<32x2x8xf32>
  // CHECK: moe.flash_attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16x2x8xbf16>, tensor<?x16x2x8xbf16>, tensor<?x16x2x8xbf16> -> tensor<?x16x2x8xbf16>, tensor<?x16x2xf32>
  %b = arith.truncf %q : tensor<?x16x2x8xf32> to tensor<?x16x2x8xbf16>
  %bo, %blse = moe.flash_attention %b, %b, %b : tensor<?x16x2x8xbf16>, tensor<?x16x2x8xbf16>, tensor<?x16x2x8xbf16> -> tensor<?x16x2x8xbf16>, tensor<?x16x2xf32>
  return %dq, %gr, %fk, %fr : tensor<?x16x2x8xf32>, tensor<32x2x8xf32>, tensor<?x32x2x8xf32>, tensor<32x2x8xf32>
}

// The differentiable building blocks the decomposition emits.
// CHECK-LABEL: func.func @building_blocks
func.func @building_blocks(%x: tensor<?x16xf32>, %w: tensor<8x16xf32>,
                           %h: tensor<?x4x16xf32>, %m: tensor<?x6x16xf32>,
                           %g: tensor<16xf32>, %q: tensor<?x4x2x8xbf16>,
                           %table: tensor<256x16xf32>, %t: tensor<?x4xi32>,
                           %l: tensor<?x4x256xf32>) -> tensor<f32> {
  // CHECK: moe.linear %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f64} : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %y = moe.linear %x, %w {scale = 0.5} : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  // CHECK: moe.linear %{{.*}}, %{{.*}} : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %y1 = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  // CHECK: moe.relu %{{.*}} : tensor<?x8xf32>
  %r = moe.relu %y : tensor<?x8xf32>
  // CHECK: moe.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-03 : f64} : tensor<?x4x16xf32>, tensor<16xf32>
  %n = moe.layer_norm %h, %g, %g {eps = 1.0e-3} : tensor<?x4x16xf32>, tensor<16xf32>
  // CHECK: moe.rope %{{.*}} {offset = 4 : i64} : tensor<?x4x2x8xbf16>
  %p = moe.rope %q {offset = 4} : tensor<?x4x2x8xbf16>
  // A decoding step's rotation starts at a position.
  // CHECK: moe.rope %{{.*}} at %{{.*}} : tensor<?x4x2x8xbf16>
  %start = arith.constant 5 : index
  %ps = moe.rope %q at %start : tensor<?x4x2x8xbf16>
  // CHECK: moe.embed %{{.*}}, %{{.*}} : tensor<256x16xf32>, tensor<?x4xi32> -> tensor<?x4x16xf32>
  %e = moe.embed %table, %t : tensor<256x16xf32>, tensor<?x4xi32> -> tensor<?x4x16xf32>
  // CHECK: moe.embed_grad %{{.*}}, %{{.*}} : tensor<?xi32>, tensor<?x16xf32> -> tensor<256x16xf32>
  %ft = tensor.collapse_shape %t [[0, 1]] : tensor<?x4xi32> into tensor<?xi32>
  %fe = tensor.collapse_shape %e [[0, 1], [2]] : tensor<?x4x16xf32> into tensor<?x16xf32>
  %dt = moe.embed_grad %ft, %fe : tensor<?xi32>, tensor<?x16xf32> -> tensor<256x16xf32>
  // CHECK: moe.concat %{{.*}}, %{{.*}} : tensor<?x6x16xf32>, tensor<?x4x16xf32> -> tensor<?x10x16xf32>
  %c = moe.concat %m, %h : tensor<?x6x16xf32>, tensor<?x4x16xf32> -> tensor<?x10x16xf32>
  // CHECK: moe.cross_entropy %{{.*}}, %{{.*}} : tensor<?x4x256xf32>, tensor<?x4xi32> -> tensor<f32>
  %loss = moe.cross_entropy %l, %t : tensor<?x4x256xf32>, tensor<?x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// Training-only ops: seeded and unseeded dropout masks, dropout, the routing
// entropy and an auxiliary loss.
// CHECK-LABEL: func.func @training_ops
func.func @training_ops(%x: tensor<?x8xf32>, %z: tensor<?x4xf32>, %s: tensor<i64>) -> (tensor<?x8xf32>, tensor<?x4xi1>) {
  // CHECK: moe.dropout_mask %{{.*}} {rate = 1.000000e-01 : f64} : tensor<?x8xf32> -> tensor<?x8xi1>
  %m = moe.dropout_mask %x {rate = 0.1 : f64} : tensor<?x8xf32> -> tensor<?x8xi1>
  // CHECK: moe.dropout_mask %{{.*}} seed(%{{.*}}) {rate = 2.500000e-01 : f64, stream = 3 : i64} : tensor<?x4xf32>, tensor<i64> -> tensor<?x4xi1>
  %n = moe.dropout_mask %z seed(%s) {rate = 0.25 : f64, stream = 3 : i64} : tensor<?x4xf32>, tensor<i64> -> tensor<?x4xi1>
  // CHECK: moe.dropout %{{.*}}, %{{.*}} {rate = 1.000000e-01 : f64} : tensor<?x8xf32>, tensor<?x8xi1>
  %y = moe.dropout %x, %m {rate = 0.1 : f64} : tensor<?x8xf32>, tensor<?x8xi1>
  // CHECK: moe.routing_entropy %{{.*}} : tensor<?x4xf32> -> tensor<f32>
  %h = moe.routing_entropy %z : tensor<?x4xf32> -> tensor<f32>
  // CHECK: moe.add_loss %{{.*}}, %{{.*}} {weight = -1.000000e-03 : f64} : tensor<?x8xf32>, tensor<f32>
  %r = moe.add_loss %y, %h {weight = -1.0e-3 : f64} : tensor<?x8xf32>, tensor<f32>
  return %r, %n : tensor<?x8xf32>, tensor<?x4xi1>
}

// The fused kernel-level ops of the fusion passes, with the examples of
// their descriptions.
// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<?x128xf32>, %w: tensor<10x128xf32>, %w8: tensor<8x128xf32>, %drop: tensor<?x8xi1>, %wv: tensor<10x128x32xf32>, %wo: tensor<10x32x128xf32>) -> (tensor<?x2x3xf32>, tensor<?x2xi64>, tensor<?x128xf32>) {
  // CHECK: %[[V:.*]], %[[I:.*]], %{{.*}} = moe.fused_router %{{.*}}, %{{.*}} k(3) : tensor<?x128xf32>, tensor<10x128xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
  %v, %i, %s = moe.fused_router %x, %w k(3) : tensor<?x128xf32>, tensor<10x128xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
  // CHECK: moe.fused_router %{{.*}}, %{{.*}} k(2) mask(%{{.*}}) : tensor<?x128xf32>, tensor<8x128xf32>, tensor<?x8xi1> -> tensor<?x2xf32>, tensor<?x2xi64>, tensor<?x8xf32>
  %mv, %mi, %ms = moe.fused_router %x, %w8 k(2) mask(%drop) : tensor<?x128xf32>, tensor<8x128xf32>, tensor<?x8xi1> -> tensor<?x2xf32>, tensor<?x2xi64>, tensor<?x8xf32>
  // CHECK: %[[P:.*]] = moe.fused_expert_proj %{{.*}}, %{{.*}}, %[[V]], %[[I]] : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x32xf32>
  %p = moe.fused_expert_proj %x, %wv, %v, %i : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x32xf32>
  // CHECK: moe.fused_expert_merge %[[P]], %{{.*}}, %[[V]], %[[I]] : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x128xf32>
  %y = moe.fused_expert_merge %p, %wo, %v, %i : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x128xf32>
  return %v, %mi, %y : tensor<?x2x3xf32>, tensor<?x2xi64>, tensor<?x128xf32>
}

// The gradients of the expert projections and their fused forms, with the
// examples of their descriptions.
// CHECK-LABEL: func.func @expert_projection_grads
// CHECK-SAME: (%[[X:.*]]: tensor<?x128xf32>, %[[WV:.*]]: tensor<10x128x32xf32>, %[[WO:.*]]: tensor<10x32x128xf32>, %[[G:.*]]: tensor<?x2x3xf32>, %[[I:.*]]: tensor<?x2x3xi32>, %[[DV:.*]]: tensor<?x2x32xf32>, %[[DY:.*]]: tensor<?x128xf32>)
func.func @expert_projection_grads(%x: tensor<?x128xf32>, %w_v: tensor<10x128x32xf32>, %w_o: tensor<10x32x128xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dv: tensor<?x2x32xf32>, %dy: tensor<?x128xf32>) -> (tensor<?x128xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x32xf32>) {
  // CHECK: %[[DX:.*]], %{{.*}}, %{{.*}} = moe.expert_proj_grad %[[X]], %[[WV]], %[[G]], %[[I]], %[[DV]] : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x32xf32> -> tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>
  %dx, %dwv, %dgv = moe.expert_proj_grad %x, %w_v, %g, %i, %dv : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x32xf32> -> tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>
  // CHECK: %[[DO:.*]], %[[DWO:.*]], %[[DGO:.*]] = moe.expert_merge_grad %[[DV]], %[[WO]], %[[G]], %[[I]], %[[DY]] : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x128xf32> -> tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>
  %do, %dwo, %dgo = moe.expert_merge_grad %dv, %w_o, %g, %i, %dy : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x128xf32> -> tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>
  // CHECK: %[[FX:.*]], %{{.*}}, %[[FG:.*]] = moe.fused_expert_proj_grad %[[DX]], %[[WV]], %[[DGO]], %[[I]], %[[DO]] : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x32xf32> -> tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>
  %fx, %fwv, %fgv = moe.fused_expert_proj_grad %dx, %w_v, %dgo, %i, %do : tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x32xf32> -> tensor<?x128xf32>, tensor<10x128x32xf32>, tensor<?x2x3xf32>
  // CHECK: %[[FO:.*]], %[[FW:.*]], %{{.*}} = moe.fused_expert_merge_grad %[[DO]], %[[DWO]], %[[FG]], %[[I]], %[[FX]] : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x128xf32> -> tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>
  %fo, %fwo, %fgo = moe.fused_expert_merge_grad %do, %dwo, %fgv, %i, %fx : tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x128xf32> -> tensor<?x2x32xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>
  // CHECK: return %[[FX]], %[[FW]], %[[FG]], %[[FO]]
  return %fx, %fwo, %fgv, %fo : tensor<?x128xf32>, tensor<10x32x128xf32>, tensor<?x2x3xf32>, tensor<?x2x32xf32>
}

// moe.flash_attention_kernel on tensors (the example of its description)
// and on buffers (no results).
// CHECK-LABEL: func.func @flash_attention_kernel
// CHECK: %{{.*}}:2 = moe.flash_attention_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>) outs(%{{.*}}, %{{.*}} : tensor<?x16x2x32xf32>, tensor<?x16x2xf32>) -> tensor<?x16x2x32xf32>, tensor<?x16x2xf32>
// CHECK: moe.flash_attention_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x16x2x32xbf16>, memref<2x24x2x32xbf16>, memref<2x24x2x32xbf16>) outs(%{{.*}}, %{{.*}} : memref<2x16x2x32xf32>, memref<2x16x2xf32>){{$}}
func.func @flash_attention_kernel(%q: tensor<?x16x2x32xf32>, %oi: tensor<?x16x2x32xf32>, %li: tensor<?x16x2xf32>, %bq: memref<2x16x2x32xbf16>, %bk: memref<2x24x2x32xbf16>, %bo: memref<2x16x2x32xf32>, %bl: memref<2x16x2xf32>) -> (tensor<?x16x2x32xf32>, tensor<?x16x2xf32>) {
  %o, %lse = moe.flash_attention_kernel ins(%q, %q, %q : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>) outs(%oi, %li : tensor<?x16x2x32xf32>, tensor<?x16x2xf32>) -> tensor<?x16x2x32xf32>, tensor<?x16x2xf32>
  moe.flash_attention_kernel ins(%bq, %bk, %bk : memref<2x16x2x32xbf16>, memref<2x24x2x32xbf16>, memref<2x24x2x32xbf16>) outs(%bo, %bl : memref<2x16x2x32xf32>, memref<2x16x2xf32>)
  return %o, %lse : tensor<?x16x2x32xf32>, tensor<?x16x2xf32>
}

// moe.flash_attention_grad_kernel on tensors (the example of its
// description) and on buffers (no results; keys ahead of the queries).
// CHECK-LABEL: func.func @flash_attention_grad_kernel
// CHECK: %{{.*}}:3 = moe.flash_attention_grad_kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2xf32>, tensor<?x16x2xf32>, tensor<?x16x2x32xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>) -> tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>
// CHECK: moe.flash_attention_grad_kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<2x16x2x32xf32>, memref<2x24x2x32xf32>, memref<2x24x2x32xf32>, memref<2x16x2xf32>, memref<2x16x2xf32>, memref<2x16x2x32xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x16x2x32xf32>, memref<2x24x2x32xf32>, memref<2x24x2x32xf32>){{$}}
func.func @flash_attention_grad_kernel(%q: tensor<?x16x2x32xf32>, %lse: tensor<?x16x2xf32>, %bq: memref<2x16x2x32xf32>, %bk: memref<2x24x2x32xf32>, %bl: memref<2x16x2xf32>) -> (tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>) {
  %dq, %dk, %dv = moe.flash_attention_grad_kernel ins(%q, %q, %q, %lse, %lse, %q : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2xf32>, tensor<?x16x2xf32>, tensor<?x16x2x32xf32>) outs(%q, %q, %q : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>) -> tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>
  moe.flash_attention_grad_kernel ins(%bq, %bk, %bk, %bl, %bl, %bq : memref<2x16x2x32xf32>, memref<2x24x2x32xf32>, memref<2x24x2x32xf32>, memref<2x16x2xf32>, memref<2x16x2xf32>, memref<2x16x2x32xf32>) outs(%bq, %bk, %bk : memref<2x16x2x32xf32>, memref<2x24x2x32xf32>, memref<2x24x2x32xf32>)
  return %dq, %dk, %dv : tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>
}

// With relative keys: rel after ins, and for the gradient rel_grad (f32, it
// accumulates) after outs; on tensors a fourth result.
// CHECK-LABEL: func.func @flash_attention_kernels_rel
// CHECK: %{{.*}}:2 = moe.flash_attention_kernel ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<?x32x2x32xbf16>) rel(%{{.*}} : tensor<32x2x32xbf16>) outs(%{{.*}}, %{{.*}} : tensor<?x16x2x32xbf16>, tensor<?x16x2xf32>) -> tensor<?x16x2x32xbf16>, tensor<?x16x2xf32>
// CHECK: %{{.*}}:4 = moe.flash_attention_grad_kernel ins({{.*}}) rel(%{{.*}} : tensor<32x2x32xbf16>) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<?x32x2x32xbf16>) rel_grad(%{{.*}} : tensor<32x2x32xf32>) -> tensor<?x16x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<32x2x32xf32>
// CHECK: moe.flash_attention_grad_kernel ins({{.*}}) rel(%{{.*}} : memref<32x2x32xbf16>) outs({{.*}}) rel_grad(%{{.*}} : memref<32x2x32xf32>){{$}}
func.func @flash_attention_kernels_rel(%q: tensor<?x16x2x32xbf16>, %k: tensor<?x32x2x32xbf16>, %r: tensor<32x2x32xbf16>, %lse: tensor<?x16x2xf32>, %dr: tensor<32x2x32xf32>, %bq: memref<2x16x2x32xbf16>, %bk: memref<2x32x2x32xbf16>, %br: memref<32x2x32xbf16>, %bl: memref<2x16x2xf32>, %bdr: memref<32x2x32xf32>) -> (tensor<?x16x2x32xbf16>, tensor<32x2x32xf32>) {
  %o, %l = moe.flash_attention_kernel ins(%q, %k, %k : tensor<?x16x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<?x32x2x32xbf16>) rel(%r : tensor<32x2x32xbf16>) outs(%q, %lse : tensor<?x16x2x32xbf16>, tensor<?x16x2xf32>) -> tensor<?x16x2x32xbf16>, tensor<?x16x2xf32>
  %dq, %dk, %dv, %drel = moe.flash_attention_grad_kernel ins(%q, %k, %k, %l, %l, %o : tensor<?x16x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<?x16x2xf32>, tensor<?x16x2xf32>, tensor<?x16x2x32xbf16>) rel(%r : tensor<32x2x32xbf16>) outs(%q, %k, %k : tensor<?x16x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<?x32x2x32xbf16>) rel_grad(%dr : tensor<32x2x32xf32>) -> tensor<?x16x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<?x32x2x32xbf16>, tensor<32x2x32xf32>
  moe.flash_attention_grad_kernel ins(%bq, %bk, %bk, %bl, %bl, %bq : memref<2x16x2x32xbf16>, memref<2x32x2x32xbf16>, memref<2x32x2x32xbf16>, memref<2x16x2xf32>, memref<2x16x2xf32>, memref<2x16x2x32xbf16>) rel(%br : memref<32x2x32xbf16>) outs(%bq, %bk, %bk : memref<2x16x2x32xbf16>, memref<2x32x2x32xbf16>, memref<2x32x2x32xbf16>) rel_grad(%bdr : memref<32x2x32xf32>)
  return %dq, %drel : tensor<?x16x2x32xbf16>, tensor<32x2x32xf32>
}

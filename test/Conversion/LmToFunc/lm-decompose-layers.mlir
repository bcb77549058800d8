// RUN: switchyard-opt %s -lm-materialize-params -lm-decompose-layers | FileCheck %s

// Each layer kind becomes moe routing ops plus linalg, reading its own
// parameters; no lm layer op is left. Numerics: test/unit/ExecutionTest.cpp.
// Every op between a parameter and the loss is one with a gradient rule.

// CHECK-LABEL: lm.model @blocks
// Embedding: a gather from the table.
// CHECK: %[[TABLE:.*]] = lm.get_param @embed.weight : tensor<64x16xf32>
// CHECK: %[[X0:.*]] = moe.embed %[[TABLE]], %{{.*}} : tensor<64x16xf32>, tensor<?x4xi32> -> tensor<?x4x16xf32>
//
// SwitchHead with RoPE: block norm, scaled q and k, source-side routing for
// V, rotary positions, the attention core, destination-side routing for O,
// the residual.
// CHECK: %[[H:.*]] = moe.layer_norm %[[X0]], %{{.*}}, %{{.*}} : tensor<?x4x16xf32>, tensor<16xf32>
// CHECK: lm.get_param @sh.q : tensor<8x16xf32>
// CHECK: moe.linear %{{.*}}, %{{.*}} {scale = 0.70710678118654757 : f64} : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
// CHECK: %[[SV:.*]] = moe.gate %{{.*}}, %{{.*}} : tensor<?x16xf32>, tensor<6x16xf32> -> tensor<?x2x3xf32>
// CHECK: %[[GV:.*]], %[[IV:.*]] = moe.topk %[[SV]] k(2)
// CHECK: moe.expert_proj %{{.*}}, %{{.*}}, %[[GV]], %[[IV]] : tensor<?x16xf32>, tensor<6x16x4xf32>, tensor<?x2x2xf32>, tensor<?x2x2xi32> -> tensor<?x2x4xf32>
// CHECK: %[[Q:.*]] = moe.rope %{{.*}} : tensor<?x4x2x4xf32>
// CHECK: %[[K:.*]] = moe.rope %{{.*}} : tensor<?x4x2x4xf32>
// CHECK: %[[ATT:.*]] = moe.attention %[[Q]], %[[K]], %{{.*}} : tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32> -> tensor<?x4x2x4xf32>
// CHECK: %[[HEADS:.*]] = tensor.collapse_shape %[[ATT]] {{\[}}[0, 1], [2], [3]]
// CHECK: %[[SO:.*]] = moe.gate
// CHECK: %[[GO:.*]], %[[IO:.*]] = moe.topk %[[SO]] k(2)
// CHECK: %[[Y:.*]] = moe.expert_merge %[[HEADS]], %{{.*}}, %[[GO]], %[[IO]]
// CHECK: %[[YB:.*]] = tensor.expand_shape %[[Y]]
// CHECK: %[[X1:.*]] = arith.addf %[[X0]], %[[YB]] : tensor<?x4x16xf32>
//
// Dense XL attention with memory: the memory is normalised with the same
// norm and joined in front of the current tokens; the relative keys are the
// sinusoids (a constant generic) projected by the pos weight. Row δ of the
// sinusoids encodes the relative position p = −δ as the official code
// does: sin(p·ω_i) at channel 2i, cos(p·ω_i) at 2i+1, ω_i = exp(2i·(−ln
// 10000/D)), one per channel, the exponential in f64 rounded to f32.
// CHECK: %[[HX:.*]] = moe.layer_norm %[[X1]]
// CHECK: %[[HM:.*]] = moe.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x4x16xf32>, tensor<16xf32>
// CHECK: moe.concat %[[HM]], %[[HX]] : tensor<?x4x16xf32>, tensor<?x4x16xf32> -> tensor<?x8x16xf32>
// CHECK: lm.get_param @att.q : tensor<16x16xf32>
// CHECK: %[[OMEGA:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<16xf32>)
// CHECK: %[[CH:.*]] = linalg.index 0 : index
// CHECK: %[[ODD:.*]] = arith.andi %[[CH]], %c1 : index
// CHECK: %[[TWOI:.*]] = arith.subi %[[CH]], %[[ODD]] : index
// CHECK: %[[TWOIF:.*]] = arith.sitofp %{{.*}} : i64 to f32
// CHECK: %[[SCALED:.*]] = arith.mulf %[[TWOIF]], %{{.*}} : f32
// CHECK: %[[WIDE:.*]] = arith.extf %[[SCALED]] : f32 to f64
// CHECK: %[[EXP:.*]] = math.exp %[[WIDE]] : f64
// CHECK: arith.truncf %[[EXP]] : f64 to f32
// CHECK: linalg.generic {{.*}} ins(%[[OMEGA]] : tensor<16xf32>) outs(%{{.*}} : tensor<8x16xf32>)
// CHECK: ^bb0(%[[W:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[ROWF:.*]] = arith.sitofp %{{.*}} : i64 to f32
// CHECK: %[[P:.*]] = arith.negf %[[ROWF]] : f32
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: %[[JODD:.*]] = arith.andi %[[J]], %c1 : index
// CHECK: %[[EVEN:.*]] = arith.cmpi eq, %[[JODD]], %c0 : index
// CHECK: %[[ANGLE:.*]] = arith.mulf %[[P]], %[[W]] : f32
// CHECK: %[[SIN:.*]] = math.sin %[[ANGLE]] : f32
// CHECK: %[[COS:.*]] = math.cos %[[ANGLE]] : f32
// CHECK: arith.select %[[EVEN]], %[[SIN]], %[[COS]] : f32
// CHECK: lm.get_param @att.pos : tensor<16x16xf32>
// CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}} rel(%{{.*}} : tensor<8x4x4xf32>) : tensor<?x4x4x4xf32>, tensor<?x8x4x4xf32>, tensor<?x8x4x4xf32> -> tensor<?x4x4x4xf32>
//
// sigma-MoE: a flat router, top-k, the expert MLP.
// CHECK: %[[S:.*]] = moe.gate %{{.*}}, %{{.*}} : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
// CHECK: %[[G:.*]], %[[I:.*]] = moe.topk %[[S]] k(4)
// CHECK: moe.expert_mlp %{{.*}}, %{{.*}}, %{{.*}}, %[[G]], %[[I]]
//
// Dense FFN, final norm, output head.
// CHECK: lm.get_param @ffn.up : tensor<32x16xf32>
// CHECK: moe.relu %{{.*}} : tensor<?x32xf32>
// CHECK: lm.get_param @norm.weight
// CHECK: lm.get_param @out.weight : tensor<64x16xf32>
// CHECK: moe.linear %{{.*}}, %{{.*}} : tensor<?x16xf32>, tensor<64x16xf32> -> tensor<?x64xf32>
// CHECK: lm.return
// CHECK-NOT: lm.switchhead
// CHECK-NOT: lm.mha
// CHECK-NOT: lm.ffn
lm.model @blocks(%t: tensor<?x4xi32>, %m: tensor<?x4x16xf32>) -> tensor<?x4x64xf32> {
  %x = lm.embed "embed" %t {vocab = 64} : tensor<?x4xi32> -> tensor<?x4x16xf32>
  %a = lm.switchhead "sh" %x {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x4x16xf32>
  %b = lm.mha "att" %a memory(%m : tensor<?x4x16xf32>) {heads = 4, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x4x16xf32>
  %c = lm.sigma_moe "smoe" %b {experts = 4, k = 4, expert_dim = 8} : tensor<?x4x16xf32>
  %d = lm.ffn "ffn" %c {d_ff = 32} : tensor<?x4x16xf32>
  %n = lm.layer_norm "norm" %d : tensor<?x4x16xf32>
  %l = lm.output "out" %n {vocab = 64} : tensor<?x4x16xf32> -> tensor<?x4x64xf32>
  lm.return %l : tensor<?x4x64xf32>
}

// The loss becomes its moe counterpart.
// CHECK-LABEL: func.func @loss
// CHECK: moe.cross_entropy %{{.*}}, %{{.*}} : tensor<2x4x64xf32>, tensor<2x4xi32> -> tensor<f32>
// CHECK-NOT: lm.cross_entropy
func.func @loss(%l: tensor<2x4x64xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %loss = lm.cross_entropy %l, %t : tensor<2x4x64xf32>, tensor<2x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

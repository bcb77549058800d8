// RUN: switchyard-opt %s -split-input-file -lm-materialize-params | FileCheck %s
// RUN: switchyard-opt %s -split-input-file -lm-materialize-params=num-layers=8 | FileCheck %s --check-prefix=DEPTH8

// One SwitchHead layer and a dense FFN, width 32: every owned parameter is
// declared before the model, in layer order, with the SwitchHead
// initialisation and, for SwitchHead and sigma-MoE, the official module's
// name as its alias (the dense layers have none). L = 2 attention blocks, so s = √(2/2) = 1:
//   q, k, v, pos, routers: s/√32 = 0.1767767; o: s/√(2·8) = 0.25;
//   ffn up: s/√32, down: s/√64 = 0.125; embed and out: 1/√32.
// With num-layers=8, s = 0.5 and every scaled deviation halves.

// CHECK-LABEL: lm.param @embed.weight : tensor<256x32xf32> init <normal, std = 0.17677669529663687>
// CHECK-NEXT: lm.param @layers.0.att.norm.weight : tensor<32xf32> init <ones>
// CHECK-NEXT: lm.param @layers.0.att.norm.bias : tensor<32xf32> init <zeros>
// CHECK-NEXT: lm.param @layers.0.att.q : tensor<16x32xf32> init <normal, std = 0.17677669529663687> alias "layers.0.att.q.weight"
// CHECK-NEXT: lm.param @layers.0.att.k : tensor<16x32xf32> init <normal, std = 0.17677669529663687>
// CHECK-NEXT: lm.param @layers.0.att.v : tensor<10x32x8xf32> init <normal, std = 0.17677669529663687> alias "layers.0.att.v"
// CHECK-NEXT: lm.param @layers.0.att.o : tensor<10x8x32xf32> init <normal, std = 2.500000e-01>
// CHECK-NEXT: lm.param @layers.0.att.sel_v : tensor<10x32xf32> init <row_normal, std = 0.17677669529663687>
// CHECK-NEXT: lm.param @layers.0.att.sel_o : tensor<10x32xf32> init <row_normal, std = 0.17677669529663687>
// CHECK-NEXT: lm.param @layers.0.att.pos : tensor<16x32xf32> init <normal, std = 0.17677669529663687> alias "layers.0.att.pos_to_pk"
// CHECK-NEXT: lm.param @layers.0.ffn.norm.weight : tensor<32xf32> init <ones>{{$}}
// CHECK-NEXT: lm.param @layers.0.ffn.norm.bias : tensor<32xf32> init <zeros>
// CHECK-NEXT: lm.param @layers.0.ffn.up : tensor<64x32xf32> init <normal, std = 0.17677669529663687>
// CHECK-NEXT: lm.param @layers.0.ffn.down : tensor<32x64xf32> init <normal, std = 1.250000e-01>
// CHECK-NEXT: lm.param @layers.1.att.norm.weight : tensor<32xf32> init <ones>
// CHECK-NEXT: lm.param @layers.1.att.norm.bias : tensor<32xf32> init <zeros>
// CHECK-NEXT: lm.param @layers.1.att.q : tensor<32x32xf32> init <normal, std = 0.17677669529663687>{{$}}
// CHECK-NEXT: lm.param @layers.1.att.k : tensor<32x32xf32> init <normal, std = 0.17677669529663687>
// CHECK-NEXT: lm.param @layers.1.att.v : tensor<32x32xf32> init <normal, std = 0.17677669529663687>
// CHECK-NEXT: lm.param @layers.1.att.o : tensor<32x32xf32> init <normal, std = 0.17677669529663687>
// CHECK-NEXT: lm.param @layers.1.ffn.norm.weight : tensor<32xf32> init <ones>
// CHECK-NEXT: lm.param @layers.1.ffn.norm.bias : tensor<32xf32> init <zeros>
// CHECK-NEXT: lm.param @layers.1.ffn.sel : tensor<4x32xf32> init <row_normal, std = 0.17677669529663687> alias "layers.1.ffn.expert_sel"
// CHECK-NEXT: lm.param @layers.1.ffn.up : tensor<4x32x16xf32> init <normal, std = 0.17677669529663687> alias "layers.1.ffn.keys"
// CHECK-NEXT: lm.param @layers.1.ffn.down : tensor<4x16x32xf32> init <normal, std = 1.250000e-01> alias "layers.1.ffn.values"
// CHECK-NEXT: lm.param @norm.weight : tensor<32xf32> init <ones>
// CHECK-NEXT: lm.param @norm.bias : tensor<32xf32> init <zeros>
// CHECK-NEXT: lm.param @out.weight : tensor<256x32xf32> init <normal, std = 0.17677669529663687>
// CHECK-NEXT: lm.model @two_layers
// The model itself is unchanged.
// CHECK-NEXT: lm.embed "embed"
// CHECK-NOT: lm.param

// DEPTH8-LABEL: lm.param @embed.weight : tensor<256x32xf32> init <normal, std = 0.17677669529663687>
// DEPTH8: lm.param @layers.0.att.q : tensor<16x32xf32> init <normal, std = 0.088388347648318433>
// DEPTH8: lm.param @layers.0.att.o : tensor<10x8x32xf32> init <normal, std = 1.250000e-01>
// DEPTH8: lm.param @layers.0.ffn.down : tensor<32x64xf32> init <normal, std = 6.250000e-02>
lm.model @two_layers(%t: tensor<?x16xi32>, %m: tensor<?x16x32xf32>) -> (tensor<?x16x256xf32>, tensor<?x16x32xf32>) {
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  %a0 = lm.switchhead "layers.0.att" %x memory(%m : tensor<?x16x32xf32>) {heads = 2, experts = 5, k = 2, head_dim = 8, pos = #lm.pos<xl>} : tensor<?x16x32xf32>
  %f0 = lm.ffn "layers.0.ffn" %a0 {d_ff = 64} : tensor<?x16x32xf32>
  %a1 = lm.mha "layers.1.att" %f0 {heads = 4, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
  %f1 = lm.sigma_moe "layers.1.ffn" %a1 {experts = 4, k = 4, expert_dim = 16} : tensor<?x16x32xf32>
  %n = lm.layer_norm "norm" %f1 : tensor<?x16x32xf32>
  %l = lm.output "out" %n {vocab = 256} : tensor<?x16x32xf32> -> tensor<?x16x256xf32>
  lm.return %l, %x : tensor<?x16x256xf32>, tensor<?x16x32xf32>
}

// -----

// A declaration written by hand with the right type overrides the default
// initialiser and is not duplicated.
// CHECK-LABEL: lm.param @out.weight : tensor<64x8xf32> init <zeros>
// CHECK-NEXT: lm.param @embed.weight
// CHECK-NEXT: lm.model @override
// CHECK-NOT: lm.param
lm.param @out.weight : tensor<64x8xf32> init <zeros>
lm.model @override(%t: tensor<1x4xi32>) -> tensor<1x4x64xf32> {
  %x = lm.embed "embed" %t {vocab = 64} : tensor<1x4xi32> -> tensor<1x4x8xf32>
  %l = lm.output "out" %x {vocab = 64} : tensor<1x4x8xf32> -> tensor<1x4x64xf32>
  lm.return %l : tensor<1x4x64xf32>
}

// -----

// A hand-written declaration of a SwitchHead weight keeps its initialiser
// and gets the layer's alias; one with an alias of its own keeps it.
// CHECK-LABEL: lm.param @sh.q : tensor<8x8xf32> init <zeros> alias "sh.q.weight"
// CHECK-NEXT: lm.param @sh.k : tensor<8x8xf32> init <zeros> alias "mine.k"
// CHECK-NEXT: lm.param @embed.weight
// CHECK: lm.param @sh.pos : tensor<8x8xf32> init <normal, std = 5.000000e-01> alias "sh.pos_to_pk"
lm.param @sh.q : tensor<8x8xf32> init <zeros>
lm.param @sh.k : tensor<8x8xf32> init <zeros> alias "mine.k"
lm.model @aliases(%t: tensor<1x4xi32>) -> tensor<1x4x64xf32> {
  %x = lm.embed "embed" %t {vocab = 64} : tensor<1x4xi32> -> tensor<1x4x8xf32>
  %a = lm.switchhead "sh" %x {heads = 2, experts = 2, k = 1, head_dim = 4, pos = #lm.pos<xl>} : tensor<1x4x8xf32>
  %l = lm.output "out" %a {vocab = 64} : tensor<1x4x8xf32> -> tensor<1x4x64xf32>
  lm.return %l : tensor<1x4x64xf32>
}

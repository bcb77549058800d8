// RUN: switchyard-opt %s -lm-materialize-params -lm-decompose-layers=probes=true -convert-lm-to-func -lm-expose-probes | FileCheck %s
// RUN: switchyard-opt %s -lm-materialize-params -lm-decompose-layers=probes=true | FileCheck %s --check-prefix=MARKS

// lm-decompose-layers{probes} marks the attention cores and the routers'
// top-k of each layer with its name; lm-expose-probes returns them after
// the model's own results, in the order of their ops: per SwitchHead
// block the value side's gates and experts, the attention weights, the
// output side's; per sigma-MoE block its selection. The marks go.
// MARKS: moe.topk {{.*}} {lm.probe = "layers.0.att.v"}
// MARKS: moe.attention {{.*}} {lm.probe = "layers.0.att.attention"}
// MARKS: moe.topk {{.*}} {lm.probe = "layers.0.att.o"}
// MARKS: moe.topk {{.*}} {lm.probe = "layers.0.ffn.sel"}
// MARKS-NOT: lm.probe

// CHECK-LABEL: func.func @m(
// CHECK-SAME: -> (tensor<?x4x32xf32>,
// CHECK-SAME: tensor<?x2x2xf32> {lm.probe = "layers.0.att.v.gates"},
// CHECK-SAME: tensor<?x2x2xi32> {lm.probe = "layers.0.att.v.experts"},
// CHECK-SAME: tensor<?x2x4x4xf32> {lm.probe = "layers.0.att.attention.weights"},
// CHECK-SAME: tensor<?x2x2xf32> {lm.probe = "layers.0.att.o.gates"},
// CHECK-SAME: tensor<?x2x2xi32> {lm.probe = "layers.0.att.o.experts"},
// CHECK-SAME: tensor<?x2xf32> {lm.probe = "layers.0.ffn.sel.gates"},
// CHECK-SAME: tensor<?x2xi32> {lm.probe = "layers.0.ffn.sel.experts"})
// CHECK: %[[GV:.*]], %[[IV:.*]] = moe.topk %{{.*}} k(2) : tensor<?x2x3xf32>
// CHECK: %[[O:.*]] = moe.attention %[[Q:.*]], %[[K:.*]], %{{.*}} : tensor<?x4x2x4xf32>
// CHECK-NEXT: %[[W:.*]] = moe.attention_weights %[[Q]], %[[K]] : tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32> -> tensor<?x2x4x4xf32>
// CHECK: %[[GO:.*]], %[[IO:.*]] = moe.topk %{{.*}} k(2) : tensor<?x2x3xf32>
// CHECK: %[[GS:.*]], %[[IS:.*]] = moe.topk %{{.*}} k(2) : tensor<?x5xf32>
// CHECK: return %{{.*}}, %[[GV]], %[[IV]], %[[W]], %[[GO]], %[[IO]], %[[GS]], %[[IS]] :
// CHECK-NOT: lm.probe = "layers
lm.model @m(%t: tensor<?x4xi32>) -> tensor<?x4x32xf32> {
  %x0 = lm.embed "embed" %t {vocab = 32} : tensor<?x4xi32> -> tensor<?x4x16xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x4x16xf32>
  %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 5, k = 2, expert_dim = 4} : tensor<?x4x16xf32>
  %l = lm.output "out" %x1 {vocab = 32} : tensor<?x4x16xf32> -> tensor<?x4x32xf32>
  lm.return %l : tensor<?x4x32xf32>
}

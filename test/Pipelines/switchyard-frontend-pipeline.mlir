// RUN: switchyard-opt %s --switchyard-frontend-pipeline | FileCheck %s
// RUN: switchyard-opt %s --switchyard-frontend-pipeline=num-layers=2 | FileCheck %s --check-prefix=DEPTH2
// RUN: switchyard-opt %s --switchyard-frontend-pipeline --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=STAGES

// The front end declares every parameter of the model; its options reach
// the passes it is built from.

// CHECK: lm.param @embed.weight : tensor<256x16xf32>
// CHECK: lm.param @layers.0.att.v : tensor<8x16x4xf32> init <normal, std = 0.35355339059327379>
// CHECK: lm.param @out.weight : tensor<256x16xf32>
// CHECK: lm.model @tiny

// One attention block: L = 1, s = √2, and v has deviation s/√16 = 0.3536.
// With num-layers=2, s = 1 and the deviation is 1/√16 = 0.25.
// DEPTH2: lm.param @layers.0.att.v : tensor<8x16x4xf32> init <normal, std = 2.500000e-01>

// STAGES: IR Dump After LmMaterializeParamsPass (lm-materialize-params)
// STAGES: lm.param @embed.weight

lm.model @tiny(%t: tensor<?x8xi32>) -> tensor<?x8x256xf32> {
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x8xi32> -> tensor<?x8x16xf32>
  %a = lm.switchhead "layers.0.att" %x {heads = 2, experts = 4, k = 2, head_dim = 4} : tensor<?x8x16xf32>
  %n = lm.layer_norm "norm" %a : tensor<?x8x16xf32>
  %l = lm.output "out" %n {vocab = 256} : tensor<?x8x16xf32> -> tensor<?x8x256xf32>
  lm.return %l : tensor<?x8x256xf32>
}

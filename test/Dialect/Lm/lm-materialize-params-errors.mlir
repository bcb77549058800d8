// RUN: switchyard-opt %s -split-input-file -lm-materialize-params -verify-diagnostics

// A parameter a layer owns that is already declared with another type, or
// whose name is taken by another symbol, is an error at the layer.

// expected-note @+1 {{declared here}}
lm.param @out.weight : tensor<64x4xf32> init <zeros>
lm.model @conflict(%t: tensor<1x4xi32>) -> tensor<1x4x64xf32> {
  %x = lm.embed "embed" %t {vocab = 64} : tensor<1x4xi32> -> tensor<1x4x8xf32>
  // expected-error @+1 {{'lm.output' op owns parameter 'out.weight' of type 'tensor<64x8xf32>', but it is declared with type 'tensor<64x4xf32>'}}
  %l = lm.output "out" %x {vocab = 64} : tensor<1x4x8xf32> -> tensor<1x4x64xf32>
  lm.return %l : tensor<1x4x64xf32>
}

// -----

// expected-note @+1 {{declared here}}
func.func private @embed.weight()
lm.model @clash(%t: tensor<1x4xi32>) -> tensor<1x4x64xf32> {
  // expected-error @+1 {{'lm.embed' op owns parameter 'embed.weight' of type 'tensor<64x8xf32>', but that name belongs to a 'func.func'}}
  %x = lm.embed "embed" %t {vocab = 64} : tensor<1x4xi32> -> tensor<1x4x8xf32>
  %l = lm.output "out" %x {vocab = 64} : tensor<1x4x8xf32> -> tensor<1x4x64xf32>
  lm.return %l : tensor<1x4x64xf32>
}

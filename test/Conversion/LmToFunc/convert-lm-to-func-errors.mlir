// RUN: switchyard-opt %s -split-input-file -convert-lm-to-func -verify-diagnostics

lm.param @embed.weight : tensor<64x8xf32> init <zeros>
lm.model @not_decomposed(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'lm.embed' op must be decomposed before convert-lm-to-func (run lm-decompose-layers)}}
  %x = lm.embed "embed" %t {vocab = 64} : tensor<2x4xi32> -> tensor<2x4x8xf32>
  lm.return %x : tensor<2x4x8xf32>
}

// -----

lm.param @w : tensor<4xf32> init <zeros>
func.func @outside() -> tensor<4xf32> {
  // expected-error @+1 {{'lm.get_param' op outside an lm.model has no parameter argument to become}}
  %w = lm.get_param @w : tensor<4xf32>
  return %w : tensor<4xf32>
}

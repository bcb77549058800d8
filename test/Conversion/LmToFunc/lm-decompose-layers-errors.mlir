// RUN: switchyard-opt %s -split-input-file -lm-decompose-layers -verify-diagnostics

// Parameters must be declared first.
lm.model @undeclared(%t: tensor<?x4xi32>) -> tensor<?x4x64xf32> {
  // expected-error @+1 {{'lm.embed' op needs parameter 'embed.weight' of type 'tensor<64x16xf32>' to be declared; run lm-materialize-params first}}
  %x = lm.embed "embed" %t {vocab = 64} : tensor<?x4xi32> -> tensor<?x4x16xf32>
  %l = lm.output "out" %x {vocab = 64} : tensor<?x4x16xf32> -> tensor<?x4x64xf32>
  lm.return %l : tensor<?x4x64xf32>
}

// -----

// The batch and the sequence length cannot both be dynamic.
lm.param @embed.weight : tensor<64x16xf32> init <zeros>
lm.model @dynamic_time(%t: tensor<?x?xi32>) -> tensor<?x?x16xf32> {
  // expected-error @+1 {{'lm.embed' op expected a static batch or sequence length, found 'tensor<?x?xi32>': the two cannot both be dynamic}}
  %x = lm.embed "embed" %t {vocab = 64} : tensor<?x?xi32> -> tensor<?x?x16xf32>
  lm.return %x : tensor<?x?x16xf32>
}

// -----

// Nor for an XL memory.
lm.param @att.norm.weight : tensor<12xf32> init <ones>
lm.param @att.norm.bias : tensor<12xf32> init <zeros>
lm.param @att.q : tensor<12x12xf32> init <zeros>
lm.param @att.k : tensor<12x12xf32> init <zeros>
lm.param @att.v : tensor<12x12xf32> init <zeros>
lm.param @att.o : tensor<12x12xf32> init <zeros>
lm.param @att.pos : tensor<12x12xf32> init <zeros>
lm.model @dynamic_memory(%t: tensor<?x5xi32>, %x: tensor<?x5x12xf32>, %m: tensor<?x?x12xf32>) -> tensor<?x5x12xf32> {
  // expected-error @+1 {{'lm.mha' op expected a static batch or sequence length, found 'tensor<?x?x12xf32>': the two cannot both be dynamic}}
  %y = lm.mha "att" %x memory(%m : tensor<?x?x12xf32>) {heads = 2, head_dim = 6, pos = #lm.pos<xl>} : tensor<?x5x12xf32>
  lm.return %y : tensor<?x5x12xf32>
}

// -----

// At least one time step.
lm.param @embed.weight : tensor<64x16xf32> init <zeros>
lm.model @no_time(%t: tensor<2x0xi32>) -> tensor<2x0x16xf32> {
  // expected-error @+1 {{'lm.embed' op expected at least one time step, found 'tensor<2x0xi32>'}}
  %x = lm.embed "embed" %t {vocab = 64} : tensor<2x0xi32> -> tensor<2x0x16xf32>
  lm.return %x : tensor<2x0x16xf32>
}

// -----

// Layers own parameters only inside a model.
lm.param @ffn.norm.weight : tensor<16xf32> init <ones>
func.func @outside(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'lm.ffn' op is outside an lm.model: only the layers of a model own declared parameters}}
  %y = lm.ffn "ffn" %x {d_ff = 8} : tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

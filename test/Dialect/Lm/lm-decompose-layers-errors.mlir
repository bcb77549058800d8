// RUN: switchyard-opt %s -split-input-file -lm-decompose-layers -verify-diagnostics

// Parameters must be declared first.
lm.model @undeclared(%t: tensor<?x4xi32>) -> tensor<?x4x64xf32> {
  // expected-error @+1 {{'lm.embed' op needs parameter 'embed.weight' of type 'tensor<64x16xf32>' to be declared; run lm-materialize-params first}}
  %x = lm.embed "embed" %t {vocab = 64} : tensor<?x4xi32> -> tensor<?x4x16xf32>
  %l = lm.output "out" %x {vocab = 64} : tensor<?x4x16xf32> -> tensor<?x4x64xf32>
  lm.return %l : tensor<?x4x64xf32>
}

// -----

// Only the batch may be dynamic.
lm.param @embed.weight : tensor<64x16xf32> init <zeros>
lm.model @dynamic_time(%t: tensor<?x?xi32>) -> tensor<?x?x16xf32> {
  // expected-error @+1 {{'lm.embed' op expected a static sequence length (dim 1 of 'tensor<?x?x16xf32>'): only the batch dimension may be dynamic}}
  %x = lm.embed "embed" %t {vocab = 64} : tensor<?x?xi32> -> tensor<?x?x16xf32>
  lm.return %x : tensor<?x?x16xf32>
}

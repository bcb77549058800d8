// RUN: switchyard-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// lm.model and lm.return
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'lm.model' op expected the first argument to be the token ids, a 2-D tensor of integers [batch, time], or hidden states, a 3-D float tensor [batch, time, width]}}
lm.model @no_tokens(%x: tensor<?x16xf32>) -> tensor<?x16x32xf32> {
  %y = tensor.empty() : tensor<1x16x32xf32>
  %z = tensor.cast %y : tensor<1x16x32xf32> to tensor<?x16x32xf32>
  lm.return %z : tensor<?x16x32xf32>
}

// -----

// expected-error @+1 {{'lm.model' op expected the first result to be the logits or hidden states, a 3-D float tensor [batch, time, vocab or width]}}
lm.model @no_logits(%t: tensor<?x16xi32>) -> tensor<?x16xi32> {
  lm.return %t : tensor<?x16xi32>
}

// -----

lm.model @same_name(%t: tensor<?x16xi32>) -> tensor<?x16x256xf32> {
  // expected-note @+1 {{first used here}}
  %x = lm.embed "layers.0" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  // expected-error @+1 {{'lm.ffn' op reuses the layer name "layers.0"; layer names must be unique in a model}}
  %y = lm.ffn "layers.0" %x {d_ff = 64} : tensor<?x16x32xf32>
  %l = lm.output "out" %y {vocab = 256} : tensor<?x16x32xf32> -> tensor<?x16x256xf32>
  lm.return %l : tensor<?x16x256xf32>
}

// -----

lm.model @return_count(%t: tensor<?x16xi32>) -> tensor<?x16x256xf32> {
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x256xf32>
  // expected-error @+1 {{'lm.return' op expected 1 operands (the model's results), found 2}}
  lm.return %x, %x : tensor<?x16x256xf32>, tensor<?x16x256xf32>
}

// -----

lm.model @return_type(%t: tensor<?x16xi32>) -> tensor<?x16x256xf32> {
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x256xf16>
  // expected-error @+1 {{'lm.return' op expected operand #0 of type 'tensor<?x16x256xf32>' (model result type), found 'tensor<?x16x256xf16>'}}
  lm.return %x : tensor<?x16x256xf16>
}

// -----

//===----------------------------------------------------------------------===//
// Layer names
//===----------------------------------------------------------------------===//

func.func @bad_name(%t: tensor<?x16xi32>) {
  // expected-error @+1 {{'lm.embed' op expected a layer name made of dot-separated identifiers (like "layers.0.att"), found "layers..0"}}
  %x = lm.embed "layers..0" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  return
}

// -----

func.func @empty_name(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op expected a layer name made of dot-separated identifiers (like "layers.0.att"), found ""}}
  %y = lm.layer_norm "" %x : tensor<?x16x32xf32>
  return
}

// -----

func.func @name_chars(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.ffn' op expected a layer name made of dot-separated identifiers (like "layers.0.att"), found "layers/0"}}
  %y = lm.ffn "layers/0" %x {d_ff = 64} : tensor<?x16x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// lm.param, lm.get_param, #lm.init
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'lm.param' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of any type values}}
lm.param @dynamic : tensor<?x32xf32> init <zeros>

// -----

// expected-error @+1 {{initialiser 'normal' needs a positive std, found 0}}
lm.param @no_std : tensor<4xf32> init <normal>

// -----

// expected-error @+1 {{initialiser 'ones' takes no std}}
lm.param @std_on_ones : tensor<4xf32> init <ones, std = 1.0>

// -----

// expected-error @+1 {{expected an initialiser kind (zeros, ones, normal, row_normal), found 'uniform'}}
lm.param @unknown_init : tensor<4xf32> init <uniform>

// -----

func.func @missing_param() {
  // expected-error @+1 {{'lm.get_param' op expected @nowhere to name an lm.param declaration}}
  %w = lm.get_param @nowhere : tensor<4xf32>
  return
}

// -----

lm.param @w : tensor<4xf32> init <zeros>
func.func @param_type() {
  // expected-error @+1 {{'lm.get_param' op expected result type 'tensor<4xf32>' (the declared type of @w), found 'tensor<4xf16>'}}
  %w = lm.get_param @w : tensor<4xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// lm.embed, lm.layer_norm, lm.output, lm.cross_entropy
//===----------------------------------------------------------------------===//

func.func @embed_width(%t: tensor<?x16xi32>) {
  // expected-error @+1 {{'lm.embed' op expected a static model width (result dim 2): parameter shapes depend on it}}
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x?xf32>
  return
}

// -----

func.func @embed_batch(%t: tensor<4x16xi32>) {
  // expected-error @+1 {{'lm.embed' op expected the batch to agree: tokens dim 0 is 4 but result dim 0 is 2}}
  %x = lm.embed "embed" %t {vocab = 256} : tensor<4x16xi32> -> tensor<2x16x32xf32>
  return
}

// -----

func.func @embed_time(%t: tensor<?x16xi32>) {
  // expected-error @+1 {{'lm.embed' op expected the time steps to agree: tokens dim 1 is 16 but result dim 1 is 8}}
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x8x32xf32>
  return
}

// -----

func.func @embed_vocab(%t: tensor<?x16xi32>) {
  // expected-error @+1 {{'lm.embed' op attribute 'vocab' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %x = lm.embed "embed" %t {vocab = 0} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  return
}

// -----

func.func @embed_token_type(%t: tensor<?x16xf32>) {
  // expected-error @+1 {{'lm.embed' op operand #0 must be 2D tensor of 32-bit signless integer or 64-bit signless integer values}}
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xf32> -> tensor<?x16x32xf32>
  return
}

// -----

func.func @norm_width(%x: tensor<?x16x?xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op expected a static model width (input dim 2): parameter shapes depend on it}}
  %y = lm.layer_norm "norm" %x : tensor<?x16x?xf32>
  return
}

// -----

func.func @norm_eps(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op attribute 'eps' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %y = lm.layer_norm "norm" %x {eps = 0.0} : tensor<?x16x32xf32>
  return
}

// -----

func.func @norm_rank(%x: tensor<16x32xf32>) {
  // expected-error @+1 {{'lm.layer_norm' op operand #0 must be 3D tensor of 32-bit float or 16-bit float or bfloat16 type values}}
  %y = lm.layer_norm "norm" %x : tensor<16x32xf32>
  return
}

// -----

func.func @output_vocab(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.output' op expected result dim 2 to be the vocabulary size 256, found 100}}
  %l = lm.output "out" %x {vocab = 256} : tensor<?x16x32xf32> -> tensor<?x16x100xf32>
  return
}

// -----

func.func @output_width(%x: tensor<?x16x?xf32>) {
  // expected-error @+1 {{'lm.output' op expected a static model width (input dim 2): parameter shapes depend on it}}
  %l = lm.output "out" %x {vocab = 256} : tensor<?x16x?xf32> -> tensor<?x16x256xf32>
  return
}

// -----

func.func @output_batch(%x: tensor<3x16x32xf32>) {
  // expected-error @+1 {{'lm.output' op expected the batch to agree: input dim 0 is 3 but result dim 0 is 4}}
  %l = lm.output "out" %x {vocab = 256} : tensor<3x16x32xf32> -> tensor<4x16x256xf32>
  return
}

// -----

func.func @output_time(%x: tensor<3x16x32xf32>) {
  // expected-error @+1 {{'lm.output' op expected the time steps to agree: input dim 1 is 16 but result dim 1 is 15}}
  %l = lm.output "out" %x {vocab = 256} : tensor<3x16x32xf32> -> tensor<3x15x256xf32>
  return
}

// -----

func.func @loss_batch(%l: tensor<2x16x256xf32>, %t: tensor<3x16xi32>) {
  // expected-error @+1 {{'lm.cross_entropy' op expected the batch to agree: logits dim 0 is 2 but targets dim 0 is 3}}
  %loss = lm.cross_entropy %l, %t : tensor<2x16x256xf32>, tensor<3x16xi32> -> tensor<f32>
  return
}

// -----

func.func @loss_time(%l: tensor<?x16x256xf32>, %t: tensor<?x15xi32>) {
  // expected-error @+1 {{'lm.cross_entropy' op expected the time steps to agree: logits dim 1 is 16 but targets dim 1 is 15}}
  %loss = lm.cross_entropy %l, %t : tensor<?x16x256xf32>, tensor<?x15xi32> -> tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Attention blocks
//===----------------------------------------------------------------------===//

func.func @switchhead_k(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.switchhead' op expected k (6) to be at most experts (5)}}
  %y = lm.switchhead "att" %x {heads = 2, experts = 5, k = 6, head_dim = 8} : tensor<?x16x32xf32>
  return
}

// -----

func.func @switchhead_dropout(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.switchhead' op attribute 'expert_dropout' failed to satisfy constraint: 64-bit float attribute whose value is a probability in [0, 1)}}
  %y = lm.switchhead "att" %x {heads = 2, experts = 5, k = 3, head_dim = 8, expert_dropout = 1.0} : tensor<?x16x32xf32>
  return
}

// -----

func.func @switchhead_heads(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.switchhead' op attribute 'heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %y = lm.switchhead "att" %x {heads = 0, experts = 5, k = 3, head_dim = 8} : tensor<?x16x32xf32>
  return
}

// -----

func.func @switchhead_missing(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.switchhead' op requires attribute 'experts'}}
  %y = lm.switchhead "att" %x {heads = 2, k = 3, head_dim = 8} : tensor<?x16x32xf32>
  return
}

// -----

func.func @switchhead_width(%x: tensor<?x16x?xf32>) {
  // expected-error @+1 {{'lm.switchhead' op expected a static model width (input dim 2): parameter shapes depend on it}}
  %y = lm.switchhead "att" %x {heads = 2, experts = 5, k = 3, head_dim = 8} : tensor<?x16x?xf32>
  return
}

// -----

func.func @rope_head_dim(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.mha' op expected head_dim of at least 4 with rope (half the channels rotate, in pairs), found 2}}
  %y = lm.mha "att" %x {heads = 16, head_dim = 2, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
  return
}

// -----

func.func @memory_without_xl(%x: tensor<?x16x32xf32>, %m: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.switchhead' op expected pos = #lm.pos<xl> for a memory operand, found #lm.pos<rope>}}
  %y = lm.switchhead "att" %x memory(%m : tensor<?x16x32xf32>) {heads = 2, experts = 5, k = 3, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
  return
}

// -----

func.func @memory_batch(%x: tensor<2x16x32xf32>, %m: tensor<3x16x32xf32>) {
  // expected-error @+1 {{'lm.mha' op expected the batch to agree: memory dim 0 is 3 but input dim 0 is 2}}
  %y = lm.mha "att" %x memory(%m : tensor<3x16x32xf32>) {heads = 4, head_dim = 8, pos = #lm.pos<xl>} : tensor<2x16x32xf32>
  return
}

// -----

func.func @memory_width(%x: tensor<?x16x32xf32>, %m: tensor<?x16x16xf32>) {
  // expected-error @+1 {{'lm.mha' op expected the model width to agree: memory dim 2 is 16 but input dim 2 is 32}}
  %y = lm.mha "att" %x memory(%m : tensor<?x16x16xf32>) {heads = 4, head_dim = 8, pos = #lm.pos<xl>} : tensor<?x16x32xf32>
  return
}

// -----

func.func @memory_type(%x: tensor<?x16x32xf32>, %m: tensor<?x16x32xbf16>) {
  // expected-error @+1 {{'lm.mha' op expected memory element type 'f32' (that of input), found 'bf16'}}
  %y = lm.mha "att" %x memory(%m : tensor<?x16x32xbf16>) {heads = 4, head_dim = 8, pos = #lm.pos<xl>} : tensor<?x16x32xf32>
  return
}

// -----

func.func @bad_pos(%x: tensor<?x16x32xf32>) {
  // expected-error @+2 {{expected ::mlir::lm::PosEncoding to be one of: none, rope, xl}}
  // expected-error @+1 {{failed to parse Lm_PosEncodingAttr parameter 'value'}}
  %y = lm.mha "att" %x {heads = 4, head_dim = 8, pos = #lm.pos<alibi>} : tensor<?x16x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Feed-forward blocks
//===----------------------------------------------------------------------===//

func.func @ffn_width(%x: tensor<?x16x?xf32>) {
  // expected-error @+1 {{'lm.ffn' op expected a static model width (input dim 2): parameter shapes depend on it}}
  %y = lm.ffn "ffn" %x {d_ff = 64} : tensor<?x16x?xf32>
  return
}

// -----

func.func @sigma_moe_k(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.sigma_moe' op expected k (9) to be at most experts (8)}}
  %y = lm.sigma_moe "ffn" %x {experts = 8, k = 9, expert_dim = 16} : tensor<?x16x32xf32>
  return
}

// -----

func.func @sigma_moe_width(%x: tensor<?x16x?xf32>) {
  // expected-error @+1 {{'lm.sigma_moe' op expected a static model width (input dim 2): parameter shapes depend on it}}
  %y = lm.sigma_moe "ffn" %x {experts = 8, k = 2, expert_dim = 16} : tensor<?x16x?xf32>
  return
}

// -----

func.func @block_result_type(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.ffn' op failed to verify that all of {input, result} have same type}}
  %y = "lm.ffn"(%x) {layer_name = "ffn", d_ff = 64} : (tensor<?x16x32xf32>) -> tensor<?x16x32xbf16>
  return
}

// -----

func.func @xl_odd_width(%x: tensor<?x16x41xf32>) {
  // expected-error @+1 {{'lm.mha' op expected an even model width with xl positions (sinusoids come in sin/cos pairs), found 41}}
  %y = lm.mha "att" %x {heads = 1, head_dim = 8, pos = #lm.pos<xl>} : tensor<?x16x41xf32>
  return
}

// -----

func.func @unknown_attribute(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.switchhead' op has no attribute 'expert' (it takes: dropout, expert_dropout, experts, head_dim, heads, k, pos)}}
  %y = lm.switchhead "att" %x {heads = 2, experts = 5, k = 3, head_dim = 8, expert = 4} : tensor<?x16x32xf32>
  return
}

// -----

// Attributes qualified by a dialect are left alone.
func.func @qualified_attribute(%x: tensor<?x16x32xf32>) {
  %y = lm.ffn "ffn" %x {d_ff = 64, mytool.note = "kept"} : tensor<?x16x32xf32>
  return
}

// -----

func.func @output_element_type(%x: tensor<?x16x32xf32>) {
  // expected-error @+1 {{'lm.output' op failed to verify that all of {input, result} have same element type}}
  %l = lm.output "out" %x {vocab = 256} : tensor<?x16x32xf32> -> tensor<?x16x256xf16>
  return
}

// -----

// Sizes past the layers' limits are refused by the verifier, before any
// parameter is declared or counted (fuzzing found them passing, then
// overflowing counts or exhausting memory).
lm.model @huge_vocab(%t: tensor<?x16xi32>) -> tensor<?x16x32xf32> {
  // expected-error @+1 {{'lm.embed' op attribute 'vocab' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive whose maximum value is 16777216}}
  %x = lm.embed "embed" %t {vocab = 1000000000} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  lm.return %x : tensor<?x16x32xf32>
}

// -----

lm.model @huge_width(%t: tensor<?x16xi32>) -> tensor<?x16x1000000xf32> {
  // expected-error @+1 {{'lm.embed' op expected a model width of at most 65536 (result dim 2), found 1000000}}
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x1000000xf32>
  lm.return %x : tensor<?x16x1000000xf32>
}

// -----

lm.model @huge_ffn(%t: tensor<?x16xi32>) -> tensor<?x16x32xf32> {
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  // expected-error @+1 {{'lm.ffn' op attribute 'd_ff' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive whose maximum value is 1048576}}
  %y = lm.ffn "ffn" %x {d_ff = 1000000000000} : tensor<?x16x32xf32>
  lm.return %y : tensor<?x16x32xf32>
}

// -----

lm.model @huge_head(%t: tensor<?x16xi32>) -> tensor<?x16x32xf32> {
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  // expected-error @+1 {{'lm.switchhead' op attribute 'head_dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive whose maximum value is 1024}}
  %y = lm.switchhead "att" %x {heads = 2, experts = 4, k = 2, head_dim = 2147483648, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
  lm.return %y : tensor<?x16x32xf32>
}

// -----

lm.model @many_experts(%t: tensor<?x16xi32>) -> tensor<?x16x32xf32> {
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  // expected-error @+1 {{'lm.sigma_moe' op attribute 'experts' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive whose maximum value is 4096}}
  %y = lm.sigma_moe "ffn" %x {experts = 100000, k = 2, expert_dim = 8} : tensor<?x16x32xf32>
  lm.return %y : tensor<?x16x32xf32>
}

// -----

lm.model @long_sequence(%t: tensor<?x2000000xi32>) -> tensor<?x2000000x32xf32> {
  // expected-error @+1 {{'lm.embed' op expected at most 1048576 positions (result dim 1), found 2000000}}
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x2000000xi32> -> tensor<?x2000000x32xf32>
  lm.return %x : tensor<?x2000000x32xf32>
}

// -----

// A parameter past 2^36 elements (within every other limit).
lm.param @big : tensor<16777216x8192xf32> init <zeros>
// expected-error @-1 {{'lm.param' op expected a parameter of at most 2^36 elements and dimensions up to 16777216, found 'tensor<16777216x8192xf32>'}}

// -----

func.func @cache_with_xl(%x: tensor<1x1x32xf32>, %k: tensor<1x16x4x8xf32>, %p: tensor<i32>) {
  // expected-error @+1 {{'lm.mha' op expected pos = #lm.pos<rope> or #lm.pos<none> and no memory with a key/value cache (XL blocks carry their memory instead)}}
  %y, %k1, %v1 = lm.mha "att" %x cache(%k, %k at %p : tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>, tensor<i32> -> tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>) {heads = 4, head_dim = 8, pos = #lm.pos<xl>} : tensor<1x1x32xf32>
  return
}

// -----

func.func @cache_shape(%x: tensor<1x1x32xf32>, %k: tensor<1x16x8x4xf32>, %p: tensor<i32>) {
  // expected-error @+1 {{'lm.switchhead' op expected keys of shape 1x?x4x8 ([input dim 0, capacity, heads, head_dim]), found 1x16x8x4}}
  %y, %k1, %v1 = lm.switchhead "att" %x cache(%k, %k at %p : tensor<1x16x8x4xf32>, tensor<1x16x8x4xf32>, tensor<i32> -> tensor<1x16x8x4xf32>, tensor<1x16x8x4xf32>) {heads = 4, experts = 2, k = 1, head_dim = 8, pos = #lm.pos<rope>} : tensor<1x1x32xf32>
  return
}

// -----

func.func @cache_types(%x: tensor<1x1x32xf32>, %k: tensor<1x16x4x8xf32>, %v: tensor<1x8x4x8xf32>, %p: tensor<i32>) {
  // expected-error @+1 {{'lm.mha' op expected the values of type 'tensor<1x16x4x8xf32>' (that of the keys), found 'tensor<1x8x4x8xf32>'}}
  %y, %k1, %v1 = lm.mha "att" %x cache(%k, %v at %p : tensor<1x16x4x8xf32>, tensor<1x8x4x8xf32>, tensor<i32> -> tensor<1x16x4x8xf32>, tensor<1x8x4x8xf32>) {heads = 4, head_dim = 8} : tensor<1x1x32xf32>
  return
}

// -----

func.func @cache_capacity(%x: tensor<1x4x32xf32>, %k: tensor<1x2x4x8xf32>, %p: tensor<i32>) {
  // expected-error @+1 {{'lm.mha' op expected a static cache capacity (keys dim 1) of at least the static time steps of the input, found 2 for 'tensor<1x4x32xf32>'}}
  %y, %k1, %v1 = lm.mha "att" %x cache(%k, %k at %p : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<i32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {heads = 4, head_dim = 8} : tensor<1x4x32xf32>
  return
}

// -----

func.func @cache_element_type(%x: tensor<1x1x32xf32>, %k: tensor<1x16x4x8xbf16>, %p: tensor<i32>) {
  // expected-error @+1 {{'lm.mha' op expected cache element type 'f32' (that of input), found 'bf16'}}
  %y, %k1, %v1 = lm.mha "att" %x cache(%k, %k at %p : tensor<1x16x4x8xbf16>, tensor<1x16x4x8xbf16>, tensor<i32> -> tensor<1x16x4x8xbf16>, tensor<1x16x4x8xbf16>) {heads = 4, head_dim = 8} : tensor<1x1x32xf32>
  return
}

// RUN: switchyard-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// moe.gate
//===----------------------------------------------------------------------===//

func.func @gate_width(%x: tensor<?x128xf32>, %w: tensor<10x64xf32>) {
  // expected-error @+1 {{'moe.gate' op expected the model width to agree: input dim 1 is 128 but weight dim 1 is 64}}
  %s = moe.gate %x, %w : tensor<?x128xf32>, tensor<10x64xf32> -> tensor<?x2x5xf32>
  return
}

// -----

func.func @gate_tokens(%x: tensor<4x128xf32>, %w: tensor<10x128xf32>) {
  // expected-error @+1 {{'moe.gate' op expected the token count to agree: input dim 0 is 4 but result dim 0 is 3}}
  %s = moe.gate %x, %w : tensor<4x128xf32>, tensor<10x128xf32> -> tensor<3x2x5xf32>
  return
}

// -----

func.func @gate_rows(%x: tensor<?x128xf32>, %w: tensor<12x128xf32>) {
  // expected-error @+1 {{'moe.gate' op expected weight dim 0 (12 router rows) to equal the experts scored per token (result dims after the first: 10)}}
  %s = moe.gate %x, %w : tensor<?x128xf32>, tensor<12x128xf32> -> tensor<?x2x5xf32>
  return
}

// -----

func.func @gate_f16_scores(%x: tensor<?x128xf16>, %w: tensor<10x128xf16>) {
  // Router scores are always f32.
  // expected-error @+1 {{'moe.gate' op result #0 must be 2D/3D tensor of 32-bit float values}}
  %s = moe.gate %x, %w : tensor<?x128xf16>, tensor<10x128xf16> -> tensor<?x10xf16>
  return
}

// -----

func.func @gate_mixed_types(%x: tensor<?x128xf16>, %w: tensor<10x128xf32>) {
  // expected-error @+1 {{'moe.gate' op failed to verify that all of {input, weight} have same element type}}
  %s = moe.gate %x, %w : tensor<?x128xf16>, tensor<10x128xf32> -> tensor<?x10xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.topk
//===----------------------------------------------------------------------===//

func.func @topk_k_too_large(%s: tensor<?x2x5xf32>) {
  // expected-error @+1 {{'moe.topk' op expected k (the k attribute, 6) to be at most the number of experts (the last dimension of scores, 5)}}
  %v, %i = moe.topk %s k(6) : tensor<?x2x5xf32> -> tensor<?x2x6xf32>, tensor<?x2x6xi32>
  return
}

// -----

func.func @topk_k_zero(%s: tensor<?x2x5xf32>) {
  // expected-error @+1 {{'moe.topk' op attribute 'k' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %v, %i = moe.topk %s k(0) : tensor<?x2x5xf32> -> tensor<?x2x0xf32>, tensor<?x2x0xi32>
  return
}

// -----

func.func @topk_values_shape(%s: tensor<?x2x5xf32>) {
  // expected-error @+1 {{'moe.topk' op expected values of shape ?x2x3 (the shape of scores with the last dimension replaced by k), found ?x2x2}}
  %v, %i = moe.topk %s k(3) : tensor<?x2x5xf32> -> tensor<?x2x2xf32>, tensor<?x2x2xi32>
  return
}

// -----

func.func @topk_mask_shape(%s: tensor<?x2x5xf32>, %m: tensor<?x2x4xi1>) {
  // expected-error @+1 {{'moe.topk' op expected mask of shape ?x2x5 (the shape of scores), found ?x2x4}}
  %v, %i = moe.topk %s k(3) mask(%m) : tensor<?x2x5xf32>, tensor<?x2x4xi1> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>
  return
}

// -----

func.func @topk_index_type(%s: tensor<?x5xf32>) {
  // expected-error @+1 {{'moe.topk' op result #1 must be 1D/2D/3D/4D tensor of 32-bit signless integer or 64-bit signless integer values}}
  %v, %i = moe.topk %s k(3) : tensor<?x5xf32> -> tensor<?x3xf32>, tensor<?x3xf32>
  return
}

// -----

func.func @topk_values_indices(%s: tensor<?x5xf32>) {
  // expected-error @+1 {{'moe.topk' op failed to verify that all of {values, indices} have same shape}}
  %v, %i = moe.topk %s k(3) : tensor<?x5xf32> -> tensor<?x3xf32>, tensor<?x2xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.expert_proj
//===----------------------------------------------------------------------===//

func.func @proj_tokens_gates(%x: tensor<4x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<3x2x3xf32>, %i: tensor<3x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_proj' op expected the token count to agree: input dim 0 is 4 but gates dim 0 is 3}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<4x16xf32>, tensor<10x16x8xf32>, tensor<3x2x3xf32>, tensor<3x2x3xi32> -> tensor<4x2x8xf32>
  return
}

// -----

func.func @proj_tokens_result(%x: tensor<4x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<4x2x3xf32>, %i: tensor<4x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_proj' op expected the token count to agree: input dim 0 is 4 but result dim 0 is 5}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<4x16xf32>, tensor<10x16x8xf32>, tensor<4x2x3xf32>, tensor<4x2x3xi32> -> tensor<5x2x8xf32>
  return
}

// -----

func.func @proj_width(%x: tensor<?x16xf32>, %w: tensor<10x32x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_proj' op expected the model width to agree: input dim 1 is 16 but weight dim 1 is 32}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x32x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x8xf32>
  return
}

// -----

func.func @proj_heads(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_proj' op expected the head count to agree: gates dim 1 is 2 but result dim 1 is 5}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x5x8xf32>
  return
}

// -----

func.func @proj_head_width(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_proj' op expected the head width to agree: weight dim 2 is 8 but result dim 2 is 4}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x4xf32>
  return
}

// -----

func.func @proj_heads_divide(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x3x3xf32>, %i: tensor<?x3x3xi32>) {
  // expected-error @+1 {{'moe.expert_proj' op expected weight dim 0 (10 expert matrices, heads × experts) to be a multiple of the head count (gates dim 1, 3)}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x3x3xf32>, tensor<?x3x3xi32> -> tensor<?x3x8xf32>
  return
}

// -----

func.func @proj_k(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x6xf32>, %i: tensor<?x2x6xi32>) {
  // expected-error @+1 {{'moe.expert_proj' op expected k (gates dim 2, 6) to be at most the number of experts (weight dim 0 / heads, 5)}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x6xf32>, tensor<?x2x6xi32> -> tensor<?x2x8xf32>
  return
}

// -----

func.func @proj_types(%x: tensor<?x16xbf16>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_proj' op failed to verify that all of {input, weight, result} have same element type}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xbf16>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x8xf32>
  return
}

// -----

func.func @proj_routes(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x2xi32>) {
  // expected-error @+1 {{'moe.expert_proj' op failed to verify that all of {gates, indices} have same shape}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x2xi32> -> tensor<?x2x8xf32>
  return
}

// -----

func.func @proj_index_type(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xindex>) {
  // expected-error @+1 {{'moe.expert_proj' op operand #3 must be 3D tensor of 32-bit signless integer or 64-bit signless integer values}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xindex> -> tensor<?x2x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.expert_merge
//===----------------------------------------------------------------------===//

func.func @merge_tokens_gates(%o: tensor<4x2x8xf32>, %w: tensor<10x8x16xf32>, %g: tensor<3x2x3xf32>, %i: tensor<3x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_merge' op expected the token count to agree: heads dim 0 is 4 but gates dim 0 is 3}}
  %y = moe.expert_merge %o, %w, %g, %i : tensor<4x2x8xf32>, tensor<10x8x16xf32>, tensor<3x2x3xf32>, tensor<3x2x3xi32> -> tensor<4x16xf32>
  return
}

// -----

func.func @merge_tokens_result(%o: tensor<4x2x8xf32>, %w: tensor<10x8x16xf32>, %g: tensor<4x2x3xf32>, %i: tensor<4x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_merge' op expected the token count to agree: heads dim 0 is 4 but result dim 0 is 2}}
  %y = moe.expert_merge %o, %w, %g, %i : tensor<4x2x8xf32>, tensor<10x8x16xf32>, tensor<4x2x3xf32>, tensor<4x2x3xi32> -> tensor<2x16xf32>
  return
}

// -----

func.func @merge_heads(%o: tensor<?x5x8xf32>, %w: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_merge' op expected the head count to agree: heads dim 1 is 5 but gates dim 1 is 2}}
  %y = moe.expert_merge %o, %w, %g, %i : tensor<?x5x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @merge_head_width(%o: tensor<?x2x4xf32>, %w: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_merge' op expected the head width to agree: heads dim 2 is 4 but weight dim 1 is 8}}
  %y = moe.expert_merge %o, %w, %g, %i : tensor<?x2x4xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @merge_width(%o: tensor<?x2x8xf32>, %w: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.expert_merge' op expected the model width to agree: weight dim 2 is 16 but result dim 1 is 32}}
  %y = moe.expert_merge %o, %w, %g, %i : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x32xf32>
  return
}

// -----

func.func @merge_heads_divide(%o: tensor<?x4x8xf32>, %w: tensor<10x8x16xf32>, %g: tensor<?x4x2xf32>, %i: tensor<?x4x2xi32>) {
  // expected-error @+1 {{'moe.expert_merge' op expected weight dim 0 (10 expert matrices, heads × experts) to be a multiple of the head count (gates dim 1, 4)}}
  %y = moe.expert_merge %o, %w, %g, %i : tensor<?x4x8xf32>, tensor<10x8x16xf32>, tensor<?x4x2xf32>, tensor<?x4x2xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @merge_k(%o: tensor<?x2x8xf32>, %w: tensor<10x8x16xf32>, %g: tensor<?x2x6xf32>, %i: tensor<?x2x6xi32>) {
  // expected-error @+1 {{'moe.expert_merge' op expected k (gates dim 2, 6) to be at most the number of experts (weight dim 0 / heads, 5)}}
  %y = moe.expert_merge %o, %w, %g, %i : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x6xf32>, tensor<?x2x6xi32> -> tensor<?x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.expert_mlp
//===----------------------------------------------------------------------===//

func.func @mlp_tokens(%x: tensor<4x16xf32>, %up: tensor<8x16x32xf32>, %down: tensor<8x32x16xf32>, %g: tensor<3x2xf32>, %i: tensor<3x2xi32>) {
  // expected-error @+1 {{'moe.expert_mlp' op expected the token count to agree: input dim 0 is 4 but gates dim 0 is 3}}
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<4x16xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<3x2xf32>, tensor<3x2xi32> -> tensor<4x16xf32>
  return
}

// -----

func.func @mlp_experts(%x: tensor<?x16xf32>, %up: tensor<8x16x32xf32>, %down: tensor<6x32x16xf32>, %g: tensor<?x2xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.expert_mlp' op expected the expert count to agree: up dim 0 is 8 but down dim 0 is 6}}
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<?x16xf32>, tensor<8x16x32xf32>, tensor<6x32x16xf32>, tensor<?x2xf32>, tensor<?x2xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @mlp_width_up(%x: tensor<?x16xf32>, %up: tensor<8x12x32xf32>, %down: tensor<8x32x16xf32>, %g: tensor<?x2xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.expert_mlp' op expected the model width to agree: input dim 1 is 16 but up dim 1 is 12}}
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<?x16xf32>, tensor<8x12x32xf32>, tensor<8x32x16xf32>, tensor<?x2xf32>, tensor<?x2xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @mlp_expert_width(%x: tensor<?x16xf32>, %up: tensor<8x16x32xf32>, %down: tensor<8x24x16xf32>, %g: tensor<?x2xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.expert_mlp' op expected the expert width to agree: up dim 2 is 32 but down dim 1 is 24}}
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<?x16xf32>, tensor<8x16x32xf32>, tensor<8x24x16xf32>, tensor<?x2xf32>, tensor<?x2xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @mlp_width_down(%x: tensor<?x16xf32>, %up: tensor<8x16x32xf32>, %down: tensor<8x32x12xf32>, %g: tensor<?x2xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.expert_mlp' op expected the model width to agree: input dim 1 is 16 but down dim 2 is 12}}
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<?x16xf32>, tensor<8x16x32xf32>, tensor<8x32x12xf32>, tensor<?x2xf32>, tensor<?x2xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @mlp_k(%x: tensor<?x16xf32>, %up: tensor<8x16x32xf32>, %down: tensor<8x32x16xf32>, %g: tensor<?x9xf32>, %i: tensor<?x9xi32>) {
  // expected-error @+1 {{'moe.expert_mlp' op expected k (gates dim 1, 9) to be at most the number of experts (up dim 0, 8)}}
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<?x16xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<?x9xf32>, tensor<?x9xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @mlp_result(%x: tensor<?x16xf32>, %up: tensor<8x16x32xf32>, %down: tensor<8x32x16xf32>, %g: tensor<?x2xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{'moe.expert_mlp' op failed to verify that all of {input, result} have same type}}
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<?x16xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>, tensor<?x2xf32>, tensor<?x2xi32> -> tensor<3x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.attention
//===----------------------------------------------------------------------===//

func.func @attention_batch(%q: tensor<2x4x2x8xf32>, %k: tensor<3x4x2x8xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the batch to agree: query dim 0 is 2 but key dim 0 is 3}}
  %o = moe.attention %q, %k, %k : tensor<2x4x2x8xf32>, tensor<3x4x2x8xf32>, tensor<3x4x2x8xf32> -> tensor<2x4x2x8xf32>
  return
}

// -----

func.func @attention_weights_shape(%q: tensor<2x4x2x8xf32>, %k: tensor<2x6x2x8xf32>) {
  // expected-error @+1 {{'moe.attention_weights' op expected result of shape 2x2x4x6 ([query dim 0, query dim 2, query dim 1, key dim 1]), found 2x4x2x6}}
  %w = moe.attention_weights %q, %k : tensor<2x4x2x8xf32>, tensor<2x6x2x8xf32> -> tensor<2x4x2x6xf32>
  return
}

// -----

func.func @attention_value_batch(%q: tensor<2x4x2x8xf32>, %k: tensor<2x4x2x8xf32>, %v: tensor<3x4x2x8xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the batch to agree: query dim 0 is 2 but value dim 0 is 3}}
  %o = moe.attention %q, %k, %v : tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<3x4x2x8xf32> -> tensor<2x4x2x8xf32>
  return
}

// -----

func.func @attention_keys(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %v: tensor<?x5x2x8xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the key count to agree: key dim 1 is 6 but value dim 1 is 5}}
  %o = moe.attention %q, %k, %v : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x5x2x8xf32> -> tensor<?x4x2x8xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<?x4x2x8xf32>, %k: tensor<?x4x3x8xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the head count to agree: query dim 2 is 2 but key dim 2 is 3}}
  %o = moe.attention %q, %k, %k : tensor<?x4x2x8xf32>, tensor<?x4x3x8xf32>, tensor<?x4x3x8xf32> -> tensor<?x4x2x8xf32>
  return
}

// -----

func.func @attention_value_heads(%q: tensor<?x4x2x8xf32>, %k: tensor<?x4x2x8xf32>, %v: tensor<?x4x3x8xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the head count to agree: query dim 2 is 2 but value dim 2 is 3}}
  %o = moe.attention %q, %k, %v : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x3x8xf32> -> tensor<?x4x2x8xf32>
  return
}

// -----

func.func @attention_width(%q: tensor<?x4x2x8xf32>, %k: tensor<?x4x2x4xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the head width to agree: query dim 3 is 8 but key dim 3 is 4}}
  %o = moe.attention %q, %k, %k : tensor<?x4x2x8xf32>, tensor<?x4x2x4xf32>, tensor<?x4x2x4xf32> -> tensor<?x4x2x8xf32>
  return
}

// -----

func.func @attention_value_width(%q: tensor<?x4x2x8xf32>, %k: tensor<?x4x2x8xf32>, %v: tensor<?x4x2x4xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the head width to agree: query dim 3 is 8 but value dim 3 is 4}}
  %o = moe.attention %q, %k, %v : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x4xf32> -> tensor<?x4x2x8xf32>
  return
}

// -----

func.func @attention_rel_keys(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %r: tensor<5x2x8xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the key count to agree: rel dim 0 is 5 but key dim 1 is 6}}
  %o = moe.attention %q, %k, %k rel(%r : tensor<5x2x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32> -> tensor<?x4x2x8xf32>
  return
}

// -----

func.func @attention_rel_heads(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %r: tensor<6x1x8xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the head count to agree: rel dim 1 is 1 but query dim 2 is 2}}
  %o = moe.attention %q, %k, %k rel(%r : tensor<6x1x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32> -> tensor<?x4x2x8xf32>
  return
}

// -----

func.func @attention_rel_width(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %r: tensor<6x2x4xf32>) {
  // expected-error @+1 {{'moe.attention' op expected the head width to agree: rel dim 2 is 4 but query dim 3 is 8}}
  %o = moe.attention %q, %k, %k rel(%r : tensor<6x2x4xf32>) : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32> -> tensor<?x4x2x8xf32>
  return
}

// -----

func.func @attention_fewer_keys(%q: tensor<?x6x2x8xf32>, %k: tensor<?x4x2x8xf32>) {
  // expected-error @+1 {{'moe.attention' op expected at least as many keys (key dim 1, 4) as queries (query dim 1, 6): the queries are the last keys}}
  %o = moe.attention %q, %k, %k : tensor<?x6x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x6x2x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Dense building blocks
//===----------------------------------------------------------------------===//

func.func @linear_width(%x: tensor<?x16xf32>, %w: tensor<8x12xf32>) {
  // expected-error @+1 {{'moe.linear' op expected the input width to agree: input dim 1 is 16 but weight dim 1 is 12}}
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x12xf32> -> tensor<?x8xf32>
  return
}

// -----

func.func @linear_rows(%x: tensor<3x16xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{'moe.linear' op expected the row count to agree: input dim 0 is 3 but result dim 0 is 4}}
  %y = moe.linear %x, %w : tensor<3x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @linear_out(%x: tensor<?x16xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{'moe.linear' op expected the output width to agree: weight dim 0 is 8 but result dim 1 is 6}}
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x6xf32>
  return
}

// -----

func.func @norm_width(%x: tensor<?x4x16xf32>, %g: tensor<12xf32>) {
  // expected-error @+1 {{'moe.layer_norm' op expected the normalised width to agree: input dim 2 is 16 but weight dim 0 is 12}}
  %y = moe.layer_norm %x, %g, %g : tensor<?x4x16xf32>, tensor<12xf32>
  return
}

// -----

func.func @embed_batch(%table: tensor<256x16xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{'moe.embed' op expected the batch to agree: tokens dim 0 is 2 but result dim 0 is 3}}
  %e = moe.embed %table, %t : tensor<256x16xf32>, tensor<2x4xi32> -> tensor<3x4x16xf32>
  return
}

// -----

func.func @embed_time(%table: tensor<256x16xf32>, %t: tensor<?x4xi32>) {
  // expected-error @+1 {{'moe.embed' op expected the time steps to agree: tokens dim 1 is 4 but result dim 1 is 5}}
  %e = moe.embed %table, %t : tensor<256x16xf32>, tensor<?x4xi32> -> tensor<?x5x16xf32>
  return
}

// -----

func.func @embed_width(%table: tensor<256x16xf32>, %t: tensor<?x4xi32>) {
  // expected-error @+1 {{'moe.embed' op expected the model width to agree: table dim 1 is 16 but result dim 2 is 8}}
  %e = moe.embed %table, %t : tensor<256x16xf32>, tensor<?x4xi32> -> tensor<?x4x8xf32>
  return
}

// -----

func.func @embed_grad_tokens(%t: tensor<6xi32>, %dy: tensor<5x16xf32>) {
  // expected-error @+1 {{'moe.embed_grad' op expected the tokens to agree: tokens dim 0 is 6 but dy dim 0 is 5}}
  %d = moe.embed_grad %t, %dy : tensor<6xi32>, tensor<5x16xf32> -> tensor<256x16xf32>
  return
}

// -----

func.func @embed_grad_width(%t: tensor<?xi32>, %dy: tensor<?x16xf32>) {
  // expected-error @+1 {{'moe.embed_grad' op expected the model width to agree: dy dim 1 is 16 but result dim 1 is 8}}
  %d = moe.embed_grad %t, %dy : tensor<?xi32>, tensor<?x16xf32> -> tensor<256x8xf32>
  return
}

// -----

func.func @concat_batch(%a: tensor<2x6x16xf32>, %b: tensor<3x4x16xf32>) {
  // expected-error @+1 {{'moe.concat' op expected the batch to agree: first dim 0 is 2 but second dim 0 is 3}}
  %c = moe.concat %a, %b : tensor<2x6x16xf32>, tensor<3x4x16xf32> -> tensor<2x10x16xf32>
  return
}

// -----

func.func @concat_result_batch(%a: tensor<2x6x16xf32>, %b: tensor<2x4x16xf32>) {
  // expected-error @+1 {{'moe.concat' op expected the batch to agree: first dim 0 is 2 but result dim 0 is 3}}
  %c = moe.concat %a, %b : tensor<2x6x16xf32>, tensor<2x4x16xf32> -> tensor<3x10x16xf32>
  return
}

// -----

func.func @concat_width(%a: tensor<?x6x16xf32>, %b: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'moe.concat' op expected the width to agree: first dim 2 is 16 but second dim 2 is 8}}
  %c = moe.concat %a, %b : tensor<?x6x16xf32>, tensor<?x4x8xf32> -> tensor<?x10x16xf32>
  return
}

// -----

func.func @concat_result_width(%a: tensor<?x6x16xf32>, %b: tensor<?x4x16xf32>) {
  // expected-error @+1 {{'moe.concat' op expected the width to agree: first dim 2 is 16 but result dim 2 is 8}}
  %c = moe.concat %a, %b : tensor<?x6x16xf32>, tensor<?x4x16xf32> -> tensor<?x10x8xf32>
  return
}

// -----

func.func @concat_length(%a: tensor<?x6x16xf32>, %b: tensor<?x4x16xf32>) {
  // expected-error @+1 {{'moe.concat' op expected result dim 1 to be 10 (first dim 1 + second dim 1), found 9}}
  %c = moe.concat %a, %b : tensor<?x6x16xf32>, tensor<?x4x16xf32> -> tensor<?x9x16xf32>
  return
}

// -----

func.func @loss_batch(%l: tensor<2x4x256xf32>, %t: tensor<3x4xi32>) {
  // expected-error @+1 {{'moe.cross_entropy' op expected the batch to agree: logits dim 0 is 2 but targets dim 0 is 3}}
  %loss = moe.cross_entropy %l, %t : tensor<2x4x256xf32>, tensor<3x4xi32> -> tensor<f32>
  return
}

// -----

func.func @loss_time(%l: tensor<?x4x256xf32>, %t: tensor<?x5xi32>) {
  // expected-error @+1 {{'moe.cross_entropy' op expected the time steps to agree: logits dim 1 is 4 but targets dim 1 is 5}}
  %loss = moe.cross_entropy %l, %t : tensor<?x4x256xf32>, tensor<?x5xi32> -> tensor<f32>
  return
}

// -----

func.func @gate_dynamic_experts(%x: tensor<?x16xf32>, %w: tensor<6x16xf32>) {
  // expected-error @+1 {{'moe.gate' op expected static expert dimensions (result dims after the first), found 'tensor<?x2x?xf32>'}}
  %s = moe.gate %x, %w : tensor<?x16xf32>, tensor<6x16xf32> -> tensor<?x2x?xf32>
  return
}

// -----

func.func @rope_dynamic_width(%q: tensor<?x4x2x?xf32>) {
  // expected-error @+1 {{'moe.rope' op expected a static head width (input dim 3): the rotated channel pairs depend on it}}
  %y = moe.rope %q : tensor<?x4x2x?xf32>
  return
}

// -----

func.func @dropout_mask_rate(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'moe.dropout_mask' op expected a rate in [0, 1), found 1.000000e+00}}
  %m = moe.dropout_mask %x {rate = 1.0 : f64} : tensor<?x8xf32> -> tensor<?x8xi1>
  return
}

// -----

func.func @dropout_mask_stream(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'moe.dropout_mask' op expected a non-negative stream, found -1}}
  %m = moe.dropout_mask %x {rate = 0.1 : f64, stream = -1 : i64} : tensor<?x8xf32> -> tensor<?x8xi1>
  return
}

// -----

func.func @dropout_mask_shape(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'moe.dropout_mask' op expected mask of shape ?x8 (the shape of the like operand), found ?x9}}
  %m = moe.dropout_mask %x {rate = 0.1 : f64} : tensor<?x8xf32> -> tensor<?x9xi1>
  return
}

// -----

func.func @dropout_rate_mismatch(%x: tensor<?x8xf32>) {
  %m = moe.dropout_mask %x {rate = 0.1 : f64} : tensor<?x8xf32> -> tensor<?x8xi1>
  // expected-error @+1 {{'moe.dropout' op has rate 2.000000e-01 but its mask was drawn with rate 1.000000e-01}}
  %y = moe.dropout %x, %m {rate = 0.2 : f64} : tensor<?x8xf32>, tensor<?x8xi1>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Fused kernels
//===----------------------------------------------------------------------===//

func.func @fused_router_width(%x: tensor<?x16xf32>, %w: tensor<10x8xf32>) {
  // expected-error @+1 {{'moe.fused_router' op expected the model width to agree: input dim 1 is 16 but weight dim 1 is 8}}
  %v, %i, %s = moe.fused_router %x, %w k(3) : tensor<?x16xf32>, tensor<10x8xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
  return
}

// -----

func.func @fused_router_dynamic_experts(%x: tensor<?x16xf32>, %w: tensor<10x16xf32>) {
  // expected-error @+1 {{'moe.fused_router' op expected static expert dimensions (scores dims after the first), found 'tensor<?x2x?xf32>'}}
  %v, %i, %s = moe.fused_router %x, %w k(3) : tensor<?x16xf32>, tensor<10x16xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x?xf32>
  return
}

// -----

func.func @fused_router_rows(%x: tensor<?x16xf32>, %w: tensor<12x16xf32>) {
  // expected-error @+1 {{'moe.fused_router' op expected weight dim 0 (12 router rows) to equal the experts scored per token (scores dims after the first: 10)}}
  %v, %i, %s = moe.fused_router %x, %w k(3) : tensor<?x16xf32>, tensor<12x16xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
  return
}

// -----

func.func @fused_router_k(%x: tensor<?x16xf32>, %w: tensor<10x16xf32>) {
  // expected-error @+1 {{'moe.fused_router' op expected k (the k attribute, 6) to be at most the number of experts (the last dimension of scores, 5)}}
  %v, %i, %s = moe.fused_router %x, %w k(6) : tensor<?x16xf32>, tensor<10x16xf32> -> tensor<?x2x6xf32>, tensor<?x2x6xi32>, tensor<?x2x5xf32>
  return
}

// -----

func.func @fused_router_values(%x: tensor<?x16xf32>, %w: tensor<10x16xf32>) {
  // expected-error @+1 {{'moe.fused_router' op expected values of shape ?x2x2 (the shape of scores with the last dimension replaced by k), found ?x2x3}}
  %v, %i, %s = moe.fused_router %x, %w k(2) : tensor<?x16xf32>, tensor<10x16xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x5xf32>
  return
}

// -----

func.func @fused_proj_dynamic_width(%x: tensor<?x16xf32>, %w: tensor<10x16x?xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.fused_expert_proj' op expected a static head width (result dim 2): it is the width of the kernel's accumulator, found 'tensor<?x2x?xf32>'}}
  %v = moe.fused_expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x?xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x?xf32>
  return
}

// -----

func.func @fused_proj_heads(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.fused_expert_proj' op expected the head count to agree: gates dim 1 is 2 but result dim 1 is 3}}
  %v = moe.fused_expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x3x8xf32>
  return
}

// -----

func.func @fused_merge_dynamic_width(%o: tensor<?x2x8xf32>, %w: tensor<10x8x?xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) {
  // expected-error @+1 {{'moe.fused_expert_merge' op expected a static model width (result dim 1): it is the width of the kernel's accumulator, found 'tensor<?x?xf32>'}}
  %y = moe.fused_expert_merge %o, %w, %g, %i : tensor<?x2x8xf32>, tensor<10x8x?xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x?xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Gradients of the expert projections
//===----------------------------------------------------------------------===//

func.func @proj_grad_head_width(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dv: tensor<?x2x4xf32>) {
  // expected-error @+1 {{'moe.expert_proj_grad' op expected the head width to agree: weight dim 2 is 8 but result_grad dim 2 is 4}}
  %dx, %dw, %dg = moe.expert_proj_grad %x, %w, %g, %i, %dv : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x4xf32> -> tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>
  return
}

// -----

func.func @proj_grad_types(%x: tensor<?x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dv: tensor<?x2x8xf32>) {
  // expected-error @+1 {{'moe.expert_proj_grad' op failed to verify that all of {input, input_grad} have same type}}
  %dx, %dw, %dg = moe.expert_proj_grad %x, %w, %g, %i, %dv : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<4x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>
  return
}

// -----

func.func @merge_grad_model_width(%o: tensor<?x2x8xf32>, %w: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dy: tensor<?x12xf32>) {
  // expected-error @+1 {{'moe.expert_merge_grad' op expected the model width to agree: weight dim 2 is 16 but result_grad dim 1 is 12}}
  %do, %dw, %dg = moe.expert_merge_grad %o, %w, %g, %i, %dy : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x12xf32> -> tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>
  return
}

// -----

func.func @merge_grad_experts(%o: tensor<?x2x8xf32>, %w: tensor<9x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dy: tensor<?x16xf32>) {
  // expected-error @+1 {{'moe.expert_merge_grad' op expected weight dim 0 (9 expert matrices, heads × experts) to be a multiple of the head count (gates dim 1, 2)}}
  %do, %dw, %dg = moe.expert_merge_grad %o, %w, %g, %i, %dy : tensor<?x2x8xf32>, tensor<9x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x16xf32> -> tensor<?x2x8xf32>, tensor<9x8x16xf32>, tensor<?x2x3xf32>
  return
}

// -----

func.func @fused_proj_grad_dynamic_width(%x: tensor<?x?xf32>, %w: tensor<10x?x8xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dv: tensor<?x2x8xf32>) {
  // expected-error @+1 {{'moe.fused_expert_proj_grad' op expected static weight dims 1 and 2: they are the widths of the kernels' accumulators, found 'tensor<10x?x8xf32>'}}
  %dx, %dw, %dg = moe.fused_expert_proj_grad %x, %w, %g, %i, %dv : tensor<?x?xf32>, tensor<10x?x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<?x?xf32>, tensor<10x?x8xf32>, tensor<?x2x3xf32>
  return
}

// -----

func.func @fused_proj_grad_tokens(%x: tensor<4x16xf32>, %w: tensor<10x16x8xf32>, %g: tensor<5x2x3xf32>, %i: tensor<5x2x3xi32>, %dv: tensor<5x2x8xf32>) {
  // expected-error @+1 {{'moe.fused_expert_proj_grad' op expected the token count to agree: input dim 0 is 4 but gates dim 0 is 5}}
  %dx, %dw, %dg = moe.fused_expert_proj_grad %x, %w, %g, %i, %dv : tensor<4x16xf32>, tensor<10x16x8xf32>, tensor<5x2x3xf32>, tensor<5x2x3xi32>, tensor<5x2x8xf32> -> tensor<4x16xf32>, tensor<10x16x8xf32>, tensor<5x2x3xf32>
  return
}

// -----

func.func @fused_merge_grad_dynamic_width(%o: tensor<?x2x8xf32>, %w: tensor<10x8x?xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dy: tensor<?x?xf32>) {
  // expected-error @+1 {{'moe.fused_expert_merge_grad' op expected static weight dims 1 and 2: they are the widths of the kernels' accumulators, found 'tensor<10x8x?xf32>'}}
  %do, %dw, %dg = moe.fused_expert_merge_grad %o, %w, %g, %i, %dy : tensor<?x2x8xf32>, tensor<10x8x?xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x?xf32> -> tensor<?x2x8xf32>, tensor<10x8x?xf32>, tensor<?x2x3xf32>
  return
}

// -----

func.func @fused_merge_grad_heads(%o: tensor<?x3x8xf32>, %w: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %dy: tensor<?x16xf32>) {
  // expected-error @+1 {{'moe.fused_expert_merge_grad' op expected the head count to agree: heads dim 1 is 3 but gates dim 1 is 2}}
  %do, %dw, %dg = moe.fused_expert_merge_grad %o, %w, %g, %i, %dy : tensor<?x3x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x16xf32> -> tensor<?x3x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// moe.attention_grad and the flash-attention ops
//===----------------------------------------------------------------------===//

func.func @attention_grad_keys(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %v: tensor<?x5x2x8xf32>, %do: tensor<?x4x2x8xf32>) {
  // expected-error @+1 {{'moe.attention_grad' op expected the key count to agree: key dim 1 is 6 but value dim 1 is 5}}
  %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x5x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x5x2x8xf32>
  return
}

// -----

func.func @attention_grad_missing_rel_grad(%q: tensor<?x4x2x8xf32>, %r: tensor<4x2x8xf32>, %do: tensor<?x4x2x8xf32>) {
  // expected-error @+1 {{'moe.attention_grad' op expected a rel_grad result exactly when there is a rel operand (rel present, rel_grad absent)}}
  %dq, %dk, %dv = moe.attention_grad %q, %q, %q, %do rel(%r : tensor<4x2x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>
  return
}

// -----

func.func @attention_grad_rel_grad_type(%q: tensor<?x4x2x8xf32>, %r: tensor<4x2x8xf32>, %do: tensor<?x4x2x8xf32>) {
  // expected-error @+1 {{'moe.attention_grad' op expected rel_grad of the type of rel, 'tensor<4x2x8xf32>', found 'tensor<?x2x8xf32>'}}
  %dq, %dk, %dv, %dr = moe.attention_grad %q, %q, %q, %do rel(%r : tensor<4x2x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x2x8xf32>
  return
}

// -----

func.func @flash_attention_dynamic_width(%q: tensor<?x4x2x?xf32>) {
  // expected-error @+1 {{'moe.flash_attention' op expected a static head width (query dim 3), found 'tensor<?x4x2x?xf32>'}}
  %o, %lse = moe.flash_attention %q, %q, %q : tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32> -> tensor<?x4x2x?xf32>, tensor<?x4x2xf32>
  return
}

// -----

func.func @flash_attention_logsumexp(%q: tensor<?x4x2x8xf32>) {
  // expected-error @+1 {{'moe.flash_attention' op expected logsumexp of shape ?x4x2 (query dims 0-2), found ?x4x3}}
  %o, %lse = moe.flash_attention %q, %q, %q : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x4x3xf32>
  return
}

// -----

func.func @flash_attention_queries(%q: tensor<?x6x2x8xf32>, %k: tensor<?x4x2x8xf32>) {
  // expected-error @+1 {{'moe.flash_attention' op expected at least as many keys (key dim 1, 4) as queries (query dim 1, 6): the queries are the last keys}}
  %o, %lse = moe.flash_attention %q, %k, %k : tensor<?x6x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x6x2x8xf32>, tensor<?x6x2xf32>
  return
}

// -----

func.func @flash_attention_grad_logsumexp(%q: tensor<?x4x2x8xf32>, %lse: tensor<?x4xf32>) {
  // expected-error @+1 {{'moe.flash_attention_grad' op operand #4 must be 3D tensor of 32-bit float values}}
  %dq, %dk, %dv = moe.flash_attention_grad %q, %q, %q, %q, %lse, %q : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>
  return
}

// -----

func.func @flash_attention_grad_rel_grad(%q: tensor<?x4x2x8xf32>, %lse: tensor<?x4x2xf32>, %r: tensor<4x2x8xf32>) {
  // expected-error @+1 {{'moe.flash_attention_grad' op expected a rel_grad result exactly when there is a rel operand (rel absent, rel_grad present)}}
  %dq, %dk, %dv, %dr = moe.flash_attention_grad %q, %q, %q, %q, %lse, %q : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<4x2x8xf32>
  return
}

// -----

func.func @flash_attention_grad_width(%q: tensor<?x4x2x?xf32>, %lse: tensor<?x4x2xf32>) {
  // expected-error @+1 {{'moe.flash_attention_grad' op expected a static head width (query dim 3), found 'tensor<?x4x2x?xf32>'}}
  %dq, %dk, %dv = moe.flash_attention_grad %q, %q, %q, %q, %lse, %q : tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>, tensor<?x4x2xf32>, tensor<?x4x2x?xf32> -> tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>
  return
}

// -----

func.func @grouped_matmul_width(%rows: tensor<?x8xf32>, %w: tensor<3x4x8xf32>, %te: tensor<?xindex>, %init: tensor<?x4xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected the reduced width to agree: rows dim 1 is 8 but weight dim 1 is 4}}
  %p = moe.grouped_matmul ins(%rows, %w, %te : tensor<?x8xf32>, tensor<3x4x8xf32>, tensor<?xindex>) outs(%init : tensor<?x4xf32>) tile_size(16) -> tensor<?x4xf32>
  return
}

// -----

func.func @grouped_matmul_tiles(%rows: tensor<32x8xf32>, %w: tensor<3x8x4xf32>, %te: tensor<3xindex>, %init: tensor<32x4xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected rows dim 0 (32) to be tile_experts dim 0 (3) times tile_size (16)}}
  %p = moe.grouped_matmul ins(%rows, %w, %te : tensor<32x8xf32>, tensor<3x8x4xf32>, tensor<3xindex>) outs(%init : tensor<32x4xf32>) tile_size(16) -> tensor<32x4xf32>
  return
}

// -----

func.func @grouped_matmul_mixed(%rows: memref<32x8xf32>, %w: tensor<3x8x4xf32>, %te: tensor<2xindex>, %init: tensor<32x4xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected ranked operands, all tensors or all buffers}}
  %p = moe.grouped_matmul ins(%rows, %w, %te : memref<32x8xf32>, tensor<3x8x4xf32>, tensor<2xindex>) outs(%init : tensor<32x4xf32>) tile_size(16) -> tensor<32x4xf32>
  return
}

// -----

func.func @grouped_matmul_buffer_result(%rows: memref<32x8xf32>, %w: memref<3x8x4xf32>, %te: memref<2xindex>, %init: memref<32x4xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected no result on buffers}}
  %p = moe.grouped_matmul ins(%rows, %w, %te : memref<32x8xf32>, memref<3x8x4xf32>, memref<2xindex>) outs(%init : memref<32x4xf32>) tile_size(16) -> tensor<32x4xf32>
  return
}

// -----

func.func @grouped_matmul_gather_alone(%x: tensor<?x8xf32>, %w: tensor<3x8x4xf32>, %te: tensor<?xindex>, %order: tensor<?xindex>, %init: tensor<?x4xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected gather and routes_per_row together}}
  %p = moe.grouped_matmul ins(%x, %w, %te : tensor<?x8xf32>, tensor<3x8x4xf32>, tensor<?xindex>) gather(%order : tensor<?xindex>) outs(%init : tensor<?x4xf32>) tile_size(16) -> tensor<?x4xf32>
  return
}

// -----

func.func @grouped_matmul_gates_alone(%rows: tensor<?x8xf32>, %w: tensor<3x8x4xf32>, %te: tensor<?xindex>, %g: tensor<?xf32>, %init: tensor<?x4xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected gates only with gather}}
  %p = moe.grouped_matmul ins(%rows, %w, %te : tensor<?x8xf32>, tensor<3x8x4xf32>, tensor<?xindex>) gates(%g : tensor<?xf32>) outs(%init : tensor<?x4xf32>) tile_size(16) -> tensor<?x4xf32>
  return
}

// -----

func.func @grouped_matmul_gate_count(%x: tensor<5x8xf32>, %w: tensor<3x8x4xf32>, %te: tensor<?xindex>, %order: tensor<?xindex>, %g: tensor<12xf32>, %init: tensor<?x4xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected one gate per route of rows (30), found 12}}
  %p = moe.grouped_matmul ins(%x, %w, %te : tensor<5x8xf32>, tensor<3x8x4xf32>, tensor<?xindex>) gather(%order : tensor<?xindex>) routes_per_row(6) gates(%g : tensor<12xf32>) outs(%init : tensor<?x4xf32>) tile_size(16) -> tensor<?x4xf32>
  return
}

// -----

func.func @grouped_matmul_gather_padded(%x: tensor<5x8xf32>, %w: tensor<3x8x4xf32>, %te: tensor<?xindex>, %order: tensor<48xindex>, %init: tensor<32x4xf32>) {
  // expected-error @+1 {{'moe.grouped_matmul' op expected the padded row count to agree: order dim 0 is 48 but init dim 0 is 32}}
  %p = moe.grouped_matmul ins(%x, %w, %te : tensor<5x8xf32>, tensor<3x8x4xf32>, tensor<?xindex>) gather(%order : tensor<48xindex>) routes_per_row(6) outs(%init : tensor<32x4xf32>) tile_size(16) -> tensor<32x4xf32>
  return
}

// -----

func.func @grouped_weight_grad_per_row(%x: tensor<?x8xf32>, %dy: tensor<?x4xf32>, %seg: tensor<4xindex>, %order: tensor<?xindex>, %init: tensor<3x8x4xf32>) {
  // expected-error @+1 {{'moe.grouped_weight_grad' op expected 2 routes_per_row values, found 1}}
  %dw = moe.grouped_weight_grad ins(%x, %dy, %seg : tensor<?x8xf32>, tensor<?x4xf32>, tensor<4xindex>) gather(%order : tensor<?xindex>) routes_per_row([6]) outs(%init : tensor<3x8x4xf32>) -> tensor<3x8x4xf32>
  return
}

// -----

func.func @grouped_weight_grad_routes(%x: tensor<5x8xf32>, %dy: tensor<5x4xf32>, %seg: tensor<4xindex>, %order: tensor<?xindex>, %init: tensor<3x8x4xf32>) {
  // expected-error @+1 {{'moe.grouped_weight_grad' op expected the gathered operands to have as many routes, found 30 and 15}}
  %dw = moe.grouped_weight_grad ins(%x, %dy, %seg : tensor<5x8xf32>, tensor<5x4xf32>, tensor<4xindex>) gather(%order : tensor<?xindex>) routes_per_row([6, 3]) outs(%init : tensor<3x8x4xf32>) -> tensor<3x8x4xf32>
  return
}

// -----

func.func @sort_routes_segments(%i: tensor<?x2x3xi32>, %s: tensor<10xindex>, %o: tensor<?xindex>, %l: tensor<?x2x3xindex>, %t: tensor<?xindex>) {
  // expected-error @+1 {{'moe.sort_routes' op expected segments dim 0 (10) to be heads times experts_per_head plus one (11)}}
  %r:4 = moe.sort_routes ins(%i : tensor<?x2x3xi32>) outs(%s, %o, %l, %t : tensor<10xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>) experts_per_head(5) tile_size(64) -> tensor<10xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>
  return
}

// -----

func.func @sort_routes_tiles(%i: tensor<?x2x3xi32>, %s: tensor<11xindex>, %o: tensor<128xindex>, %l: tensor<?x2x3xindex>, %t: tensor<3xindex>) {
  // expected-error @+1 {{'moe.sort_routes' op expected order dim 0 (128) to be tile_experts dim 0 (3) times tile_size (64)}}
  %r:4 = moe.sort_routes ins(%i : tensor<?x2x3xi32>) outs(%s, %o, %l, %t : tensor<11xindex>, tensor<128xindex>, tensor<?x2x3xindex>, tensor<3xindex>) experts_per_head(5) tile_size(64) -> tensor<11xindex>, tensor<128xindex>, tensor<?x2x3xindex>, tensor<3xindex>
  return
}

// -----

func.func @sort_routes_slots(%i: tensor<4x2x3xi32>, %s: tensor<11xindex>, %o: tensor<?xindex>, %l: tensor<4x2x2xindex>, %t: tensor<?xindex>) {
  // expected-error @+1 {{'moe.sort_routes' op expected the routes' shape to agree: indices dim 2 is 3 but slots dim 2 is 2}}
  %r:4 = moe.sort_routes ins(%i : tensor<4x2x3xi32>) outs(%s, %o, %l, %t : tensor<11xindex>, tensor<?xindex>, tensor<4x2x2xindex>, tensor<?xindex>) experts_per_head(5) tile_size(64) -> tensor<11xindex>, tensor<?xindex>, tensor<4x2x2xindex>, tensor<?xindex>
  return
}

// -----

func.func @grouped_weight_grad_segments(%x: tensor<?x8xf32>, %dy: tensor<?x4xf32>, %seg: tensor<3xindex>, %init: tensor<3x8x4xf32>) {
  // expected-error @+1 {{'moe.grouped_weight_grad' op expected segments dim 0 (3) to be one more than the experts (init dim 0, 3)}}
  %dw = moe.grouped_weight_grad ins(%x, %dy, %seg : tensor<?x8xf32>, tensor<?x4xf32>, tensor<3xindex>) outs(%init : tensor<3x8x4xf32>) -> tensor<3x8x4xf32>
  return
}

// -----

func.func @grouped_weight_grad_width(%x: tensor<?x8xf32>, %dy: tensor<?x5xf32>, %seg: tensor<4xindex>, %init: tensor<3x8x4xf32>) {
  // expected-error @+1 {{'moe.grouped_weight_grad' op expected the right width to agree: rhs dim 1 is 5 but init dim 2 is 4}}
  %dw = moe.grouped_weight_grad ins(%x, %dy, %seg : tensor<?x8xf32>, tensor<?x5xf32>, tensor<4xindex>) outs(%init : tensor<3x8x4xf32>) -> tensor<3x8x4xf32>
  return
}

// -----

func.func @flash_attention_kernel_result(%q: tensor<2x4x2x8xf32>, %lse: tensor<2x4x2xf32>) {
  // expected-error @+1 {{'moe.flash_attention_kernel' op expected one result of the type of each init, 'tensor<2x4x2x8xf32>', 'tensor<2x4x2xf32>'}}
  %o = moe.flash_attention_kernel ins(%q, %q, %q : tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) outs(%q, %lse : tensor<2x4x2x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

func.func @flash_attention_kernel_wide(%q: memref<2x4x2x136xf32>, %lse: memref<2x4x2xf32>) {
  // expected-error @+1 {{'moe.flash_attention_kernel' op expected a head width of at most 128, found 136}}
  moe.flash_attention_kernel ins(%q, %q, %q : memref<2x4x2x136xf32>, memref<2x4x2x136xf32>, memref<2x4x2x136xf32>) outs(%q, %lse : memref<2x4x2x136xf32>, memref<2x4x2xf32>)
  return
}

// -----

func.func @flash_attention_kernel_lse(%q: memref<2x4x2x8xf32>, %lse: memref<2x5x2xf32>) {
  // expected-error @+1 {{'moe.flash_attention_kernel' op expected logsumexp of shape}}
  moe.flash_attention_kernel ins(%q, %q, %q : memref<2x4x2x8xf32>, memref<2x4x2x8xf32>, memref<2x4x2x8xf32>) outs(%q, %lse : memref<2x4x2x8xf32>, memref<2x5x2xf32>)
  return
}

// -----

func.func @flash_attention_grad_kernel_delta(%q: memref<2x4x2x8xf32>, %k: memref<2x6x2x8xf32>, %lse: memref<2x4x2xf32>, %d: memref<2x4x3xf32>) {
  // expected-error @+1 {{'moe.flash_attention_grad_kernel' op expected delta of shape}}
  moe.flash_attention_grad_kernel ins(%q, %k, %k, %lse, %d, %q : memref<2x4x2x8xf32>, memref<2x6x2x8xf32>, memref<2x6x2x8xf32>, memref<2x4x2xf32>, memref<2x4x3xf32>, memref<2x4x2x8xf32>) outs(%q, %k, %k : memref<2x4x2x8xf32>, memref<2x6x2x8xf32>, memref<2x6x2x8xf32>)
  return
}

// -----

func.func @flash_attention_grad_kernel_key_grad(%q: memref<2x4x2x8xf32>, %k: memref<2x6x2x8xf32>, %lse: memref<2x4x2xf32>) {
  // expected-error @+1 {{'moe.flash_attention_grad_kernel' op expected key_grad_init of the shape of 'memref<2x6x2x8xf32>', found 'memref<2x4x2x8xf32>'}}
  moe.flash_attention_grad_kernel ins(%q, %k, %k, %lse, %lse, %q : memref<2x4x2x8xf32>, memref<2x6x2x8xf32>, memref<2x6x2x8xf32>, memref<2x4x2xf32>, memref<2x4x2xf32>, memref<2x4x2x8xf32>) outs(%q, %q, %k : memref<2x4x2x8xf32>, memref<2x4x2x8xf32>, memref<2x6x2x8xf32>)
  return
}

// -----

func.func @flash_attention_kernel_rel_count(%q: memref<2x4x2x8xf32>, %k: memref<2x6x2x8xf32>, %r: memref<5x2x8xf32>, %lse: memref<2x4x2xf32>) {
  // expected-error @+1 {{'moe.flash_attention_kernel' op expected the key count to agree: rel dim 0 is 5 but key dim 1 is 6}}
  moe.flash_attention_kernel ins(%q, %k, %k : memref<2x4x2x8xf32>, memref<2x6x2x8xf32>, memref<2x6x2x8xf32>) rel(%r : memref<5x2x8xf32>) outs(%q, %lse : memref<2x4x2x8xf32>, memref<2x4x2xf32>)
  return
}

// -----

func.func @flash_attention_grad_kernel_no_rel_grad(%q: memref<2x4x2x8xf32>, %k: memref<2x6x2x8xf32>, %r: memref<6x2x8xf32>, %lse: memref<2x4x2xf32>) {
  // expected-error @+1 {{'moe.flash_attention_grad_kernel' op expected a rel_grad_init exactly when there is a rel operand (rel present, rel_grad_init absent)}}
  moe.flash_attention_grad_kernel ins(%q, %k, %k, %lse, %lse, %q : memref<2x4x2x8xf32>, memref<2x6x2x8xf32>, memref<2x6x2x8xf32>, memref<2x4x2xf32>, memref<2x4x2xf32>, memref<2x4x2x8xf32>) rel(%r : memref<6x2x8xf32>) outs(%q, %k, %k : memref<2x4x2x8xf32>, memref<2x6x2x8xf32>, memref<2x6x2x8xf32>)
  return
}

// -----

func.func @flash_attention_grad_kernel_rel_grad_shape(%q: memref<2x4x2x8xf32>, %k: memref<2x6x2x8xf32>, %r: memref<6x2x8xf32>, %dr: memref<6x1x8xf32>, %lse: memref<2x4x2xf32>) {
  // expected-error @+1 {{'moe.flash_attention_grad_kernel' op expected rel_grad_init of the shape of 'memref<6x2x8xf32>', found 'memref<6x1x8xf32>'}}
  moe.flash_attention_grad_kernel ins(%q, %k, %k, %lse, %lse, %q : memref<2x4x2x8xf32>, memref<2x6x2x8xf32>, memref<2x6x2x8xf32>, memref<2x4x2xf32>, memref<2x4x2xf32>, memref<2x4x2x8xf32>) rel(%r : memref<6x2x8xf32>) outs(%q, %k, %k : memref<2x4x2x8xf32>, memref<2x6x2x8xf32>, memref<2x6x2x8xf32>) rel_grad(%dr : memref<6x1x8xf32>)
  return
}

// -----

func.func @flash_attention_grad_kernel_wide(%q: memref<2x4x2x136xf32>, %lse: memref<2x4x2xf32>) {
  // expected-error @+1 {{'moe.flash_attention_grad_kernel' op expected a head width of at most 128, found 136}}
  moe.flash_attention_grad_kernel ins(%q, %q, %q, %lse, %lse, %q : memref<2x4x2x136xf32>, memref<2x4x2x136xf32>, memref<2x4x2x136xf32>, memref<2x4x2xf32>, memref<2x4x2xf32>, memref<2x4x2x136xf32>) outs(%q, %q, %q : memref<2x4x2x136xf32>, memref<2x4x2x136xf32>, memref<2x4x2x136xf32>)
  return
}

// -----

// Zero heads: refused before the experts per head are computed (fuzzing
// found a division by zero here, reached from every expert projection).
func.func @expert_proj_no_heads(%x: tensor<?x16xf32>, %w: tensor<6x16x4xf32>, %g: tensor<?x0x2xf32>, %i: tensor<?x0x2xi32>) -> tensor<?x0x4xf32> {
  // expected-error @+1 {{'moe.expert_proj' op expected at least one head (gates dim 1), found 0}}
  %p = moe.expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<6x16x4xf32>, tensor<?x0x2xf32>, tensor<?x0x2xi32> -> tensor<?x0x4xf32>
  return %p : tensor<?x0x4xf32>
}

// -----

func.func @fused_expert_proj_no_heads(%x: tensor<?x16xf32>, %w: tensor<6x16x4xf32>, %g: tensor<?x0x2xf32>, %i: tensor<?x0x2xi32>) -> tensor<?x0x4xf32> {
  // expected-error @+1 {{'moe.fused_expert_proj' op expected at least one head (gates dim 1), found 0}}
  %p = moe.fused_expert_proj %x, %w, %g, %i : tensor<?x16xf32>, tensor<6x16x4xf32>, tensor<?x0x2xf32>, tensor<?x0x2xi32> -> tensor<?x0x4xf32>
  return %p : tensor<?x0x4xf32>
}

// -----

func.func @fused_expert_proj_grad_no_heads(%x: tensor<?x16xf32>, %w: tensor<6x16x8xf32>, %g: tensor<?x0x3xf32>, %i: tensor<?x0x3xi32>, %d: tensor<?x0x8xf32>) {
  // expected-error @+1 {{'moe.fused_expert_proj_grad' op expected at least one head (gates dim 1), found 0}}
  %dx, %dw, %dg = moe.fused_expert_proj_grad %x, %w, %g, %i, %d : tensor<?x16xf32>, tensor<6x16x8xf32>, tensor<?x0x3xf32>, tensor<?x0x3xi32>, tensor<?x0x8xf32> -> tensor<?x16xf32>, tensor<6x16x8xf32>, tensor<?x0x3xf32>
  return
}

// -----

func.func @fused_expert_merge_no_heads(%o: tensor<?x0x4xf32>, %w: tensor<6x4x16xf32>, %g: tensor<?x0x2xf32>, %i: tensor<?x0x2xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'moe.fused_expert_merge' op expected at least one head (gates dim 1), found 0}}
  %y = moe.fused_expert_merge %o, %w, %g, %i : tensor<?x0x4xf32>, tensor<6x4x16xf32>, tensor<?x0x2xf32>, tensor<?x0x2xi32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Sizes past the dialects' limits are refused before anything lowers or
// allocates: a head width of 100,000 (fuzzing found gpu-module-to-binary
// busy for minutes on it), and tensors past 2^24 per dimension or 2^36
// elements.
func.func @attention_wide_heads(%q: tensor<1x4x2x100000xf32>) -> tensor<1x4x2x100000xf32> {
  // expected-error @+1 {{'moe.attention' op expected a head width of at most 1024 (query dim 3), found 100000}}
  %o = moe.attention %q, %q, %q : tensor<1x4x2x100000xf32>, tensor<1x4x2x100000xf32>, tensor<1x4x2x100000xf32> -> tensor<1x4x2x100000xf32>
  return %o : tensor<1x4x2x100000xf32>
}

// -----

func.func @rope_wide_heads(%q: tensor<?x4x2x2147483648xf32>) -> tensor<?x4x2x2147483648xf32> {
  // expected-error @+1 {{'moe.rope' op expected operand #0 within the dialect's size limits (dimensions up to 16777216, 2^36 elements), found 'tensor<?x4x2x2147483648xf32>'}}
  %r = moe.rope %q : tensor<?x4x2x2147483648xf32>
  return %r : tensor<?x4x2x2147483648xf32>
}

// -----

func.func @relu_too_many_elements(%x: tensor<16777216x16777216xf32>) -> tensor<16777216x16777216xf32> {
  // expected-error @+1 {{'moe.relu' op expected operand #0 within the dialect's size limits (dimensions up to 16777216, 2^36 elements), found 'tensor<16777216x16777216xf32>'}}
  %r = moe.relu %x : tensor<16777216x16777216xf32>
  return %r : tensor<16777216x16777216xf32>
}

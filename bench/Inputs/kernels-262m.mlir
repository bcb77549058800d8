// The ops of one SwitchHead attention layer at the paper's 262M shapes
// (D 1024, 4 heads × 112, 4 experts, k 2, T 512 with 512 memory tokens,
// batch 2: N = 1024 query tokens, 2048 key/value tokens), each alone with a
// cross-entropy loss over its output, for `switchyard-bench --kernels`:
// the forward pass and the loss-and-gradient function (lm-differentiate) of
// every one, fused and unfused, show where a layer step's time goes. The
// _dx and _dw variants differentiate only the input or only the experts'
// weights (dX and dW alone); attention_causal is the core without the XL
// terms (T = S), what scaled_dot_product_attention computes.
func.func @linear_q(%x: tensor<1024x1024xf32> {lm.param = "x"}, %w: tensor<448x1024xf32> {lm.param = "w"}, %t: tensor<1x1024xi32> {lm.vocab = 448 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w {scale = 0.7} : tensor<1024x1024xf32>, tensor<448x1024xf32> -> tensor<1024x448xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1024, 448] : tensor<1024x448xf32> into tensor<1x1024x448xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x1024x448xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @route(%x: tensor<2048x1024xf32> {lm.param = "x"}, %wg: tensor<16x1024xf32> {lm.param = "wg"}, %t: tensor<1x2048xi32> {lm.vocab = 8 : i64}) -> tensor<f32> {
  %s = moe.gate %x, %wg : tensor<2048x1024xf32>, tensor<16x1024xf32> -> tensor<2048x4x4xf32>
  %g, %i = moe.topk %s k(2) : tensor<2048x4x4xf32> -> tensor<2048x4x2xf32>, tensor<2048x4x2xi32>
  %l = tensor.expand_shape %g [[0, 1], [2], [3]] output_shape [1, 2048, 4, 2] : tensor<2048x4x2xf32> into tensor<1x2048x4x2xf32>
  %c = tensor.collapse_shape %l [[0], [1], [2, 3]] : tensor<1x2048x4x2xf32> into tensor<1x2048x8xf32>
  %loss = moe.cross_entropy %c, %t : tensor<1x2048x8xf32>, tensor<1x2048xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_proj(%x: tensor<2048x1024xf32> {lm.param = "x"}, %wv: tensor<16x1024x112xf32> {lm.param = "wv"}, %g: tensor<2048x4x2xf32> {lm.param = "g"}, %i: tensor<2048x4x2xi32> {lm.vocab = 4 : i64}, %t: tensor<1x2048xi32> {lm.vocab = 448 : i64}) -> tensor<f32> {
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<2048x1024xf32>, tensor<16x1024x112xf32>, tensor<2048x4x2xf32>, tensor<2048x4x2xi32> -> tensor<2048x4x112xf32>
  %l = tensor.expand_shape %h [[0, 1], [2], [3]] output_shape [1, 2048, 4, 112] : tensor<2048x4x112xf32> into tensor<1x2048x4x112xf32>
  %c = tensor.collapse_shape %l [[0], [1], [2, 3]] : tensor<1x2048x4x112xf32> into tensor<1x2048x448xf32>
  %loss = moe.cross_entropy %c, %t : tensor<1x2048x448xf32>, tensor<1x2048xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_proj_dx(%x: tensor<2048x1024xf32> {lm.param = "x"}, %wv: tensor<16x1024x112xf32>, %g: tensor<2048x4x2xf32>, %i: tensor<2048x4x2xi32> {lm.vocab = 4 : i64}, %t: tensor<1x2048xi32> {lm.vocab = 448 : i64}) -> tensor<f32> {
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<2048x1024xf32>, tensor<16x1024x112xf32>, tensor<2048x4x2xf32>, tensor<2048x4x2xi32> -> tensor<2048x4x112xf32>
  %l = tensor.expand_shape %h [[0, 1], [2], [3]] output_shape [1, 2048, 4, 112] : tensor<2048x4x112xf32> into tensor<1x2048x4x112xf32>
  %c = tensor.collapse_shape %l [[0], [1], [2, 3]] : tensor<1x2048x4x112xf32> into tensor<1x2048x448xf32>
  %loss = moe.cross_entropy %c, %t : tensor<1x2048x448xf32>, tensor<1x2048xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_proj_dw(%x: tensor<2048x1024xf32>, %wv: tensor<16x1024x112xf32> {lm.param = "wv"}, %g: tensor<2048x4x2xf32>, %i: tensor<2048x4x2xi32> {lm.vocab = 4 : i64}, %t: tensor<1x2048xi32> {lm.vocab = 448 : i64}) -> tensor<f32> {
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<2048x1024xf32>, tensor<16x1024x112xf32>, tensor<2048x4x2xf32>, tensor<2048x4x2xi32> -> tensor<2048x4x112xf32>
  %l = tensor.expand_shape %h [[0, 1], [2], [3]] output_shape [1, 2048, 4, 112] : tensor<2048x4x112xf32> into tensor<1x2048x4x112xf32>
  %c = tensor.collapse_shape %l [[0], [1], [2, 3]] : tensor<1x2048x4x112xf32> into tensor<1x2048x448xf32>
  %loss = moe.cross_entropy %c, %t : tensor<1x2048x448xf32>, tensor<1x2048xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_merge(%o: tensor<1024x4x112xf32> {lm.param = "o"}, %wo: tensor<16x112x1024xf32> {lm.param = "wo"}, %g: tensor<1024x4x2xf32> {lm.param = "g"}, %i: tensor<1024x4x2xi32> {lm.vocab = 4 : i64}, %t: tensor<1x1024xi32> {lm.vocab = 1024 : i64}) -> tensor<f32> {
  %y = moe.expert_merge %o, %wo, %g, %i : tensor<1024x4x112xf32>, tensor<16x112x1024xf32>, tensor<1024x4x2xf32>, tensor<1024x4x2xi32> -> tensor<1024x1024xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1024, 1024] : tensor<1024x1024xf32> into tensor<1x1024x1024xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x1024x1024xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_merge_dx(%o: tensor<1024x4x112xf32> {lm.param = "o"}, %wo: tensor<16x112x1024xf32>, %g: tensor<1024x4x2xf32>, %i: tensor<1024x4x2xi32> {lm.vocab = 4 : i64}, %t: tensor<1x1024xi32> {lm.vocab = 1024 : i64}) -> tensor<f32> {
  %y = moe.expert_merge %o, %wo, %g, %i : tensor<1024x4x112xf32>, tensor<16x112x1024xf32>, tensor<1024x4x2xf32>, tensor<1024x4x2xi32> -> tensor<1024x1024xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1024, 1024] : tensor<1024x1024xf32> into tensor<1x1024x1024xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x1024x1024xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_merge_dw(%o: tensor<1024x4x112xf32>, %wo: tensor<16x112x1024xf32> {lm.param = "wo"}, %g: tensor<1024x4x2xf32>, %i: tensor<1024x4x2xi32> {lm.vocab = 4 : i64}, %t: tensor<1x1024xi32> {lm.vocab = 1024 : i64}) -> tensor<f32> {
  %y = moe.expert_merge %o, %wo, %g, %i : tensor<1024x4x112xf32>, tensor<16x112x1024xf32>, tensor<1024x4x2xf32>, tensor<1024x4x2xi32> -> tensor<1024x1024xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1024, 1024] : tensor<1024x1024xf32> into tensor<1x1024x1024xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x1024x1024xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @attention_xl(%q: tensor<2x512x4x112xf32> {lm.param = "q"}, %k: tensor<2x1024x4x112xf32> {lm.param = "k"}, %v: tensor<2x1024x4x112xf32> {lm.param = "v"}, %r: tensor<1024x4x112xf32> {lm.param = "r"}, %t: tensor<2x512xi32> {lm.vocab = 448 : i64}) -> tensor<f32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<1024x4x112xf32>) : tensor<2x512x4x112xf32>, tensor<2x1024x4x112xf32>, tensor<2x1024x4x112xf32> -> tensor<2x512x4x112xf32>
  %l = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<2x512x4x112xf32> into tensor<2x512x448xf32>
  %loss = moe.cross_entropy %l, %t : tensor<2x512x448xf32>, tensor<2x512xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @attention_causal(%q: tensor<2x512x4x112xf32> {lm.param = "q"}, %k: tensor<2x512x4x112xf32> {lm.param = "k"}, %v: tensor<2x512x4x112xf32> {lm.param = "v"}, %t: tensor<2x512xi32> {lm.vocab = 448 : i64}) -> tensor<f32> {
  %o = moe.attention %q, %k, %v : tensor<2x512x4x112xf32>, tensor<2x512x4x112xf32>, tensor<2x512x4x112xf32> -> tensor<2x512x4x112xf32>
  %l = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<2x512x4x112xf32> into tensor<2x512x448xf32>
  %loss = moe.cross_entropy %l, %t : tensor<2x512x448xf32>, tensor<2x512xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

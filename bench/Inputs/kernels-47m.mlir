// The ops of one SwitchHead attention layer at the paper's 47M shapes
// (D 412, 2 heads × 76, 5 experts, k 3, T 256 with 256 memory tokens,
// batch 2: N = 512 query tokens, 1024 key/value tokens), each alone with a
// cross-entropy loss over its output, for `switchyard-bench --kernels`:
// the forward pass and the loss-and-gradient function (lm-differentiate) of
// every one, fused and unfused, show where a layer step's time goes. The
// _dx and _dw variants differentiate only the input or only the experts'
// weights (dX and dW alone); attention_causal is the core without the XL
// terms (T = S), what scaled_dot_product_attention computes.
func.func @linear_q(%x: tensor<512x412xf32> {lm.param = "x"}, %w: tensor<152x412xf32> {lm.param = "w"}, %t: tensor<1x512xi32> {lm.vocab = 152 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w {scale = 0.7} : tensor<512x412xf32>, tensor<152x412xf32> -> tensor<512x152xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 512, 152] : tensor<512x152xf32> into tensor<1x512x152xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x512x152xf32>, tensor<1x512xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @route(%x: tensor<1024x412xf32> {lm.param = "x"}, %wg: tensor<10x412xf32> {lm.param = "wg"}, %t: tensor<1x1024xi32> {lm.vocab = 6 : i64}) -> tensor<f32> {
  %s = moe.gate %x, %wg : tensor<1024x412xf32>, tensor<10x412xf32> -> tensor<1024x2x5xf32>
  %g, %i = moe.topk %s k(3) : tensor<1024x2x5xf32> -> tensor<1024x2x3xf32>, tensor<1024x2x3xi32>
  %l = tensor.expand_shape %g [[0, 1], [2], [3]] output_shape [1, 1024, 2, 3] : tensor<1024x2x3xf32> into tensor<1x1024x2x3xf32>
  %c = tensor.collapse_shape %l [[0], [1], [2, 3]] : tensor<1x1024x2x3xf32> into tensor<1x1024x6xf32>
  %loss = moe.cross_entropy %c, %t : tensor<1x1024x6xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_proj(%x: tensor<1024x412xf32> {lm.param = "x"}, %wv: tensor<10x412x76xf32> {lm.param = "wv"}, %g: tensor<1024x2x3xf32> {lm.param = "g"}, %i: tensor<1024x2x3xi32> {lm.vocab = 5 : i64}, %t: tensor<1x1024xi32> {lm.vocab = 152 : i64}) -> tensor<f32> {
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<1024x412xf32>, tensor<10x412x76xf32>, tensor<1024x2x3xf32>, tensor<1024x2x3xi32> -> tensor<1024x2x76xf32>
  %l = tensor.expand_shape %h [[0, 1], [2], [3]] output_shape [1, 1024, 2, 76] : tensor<1024x2x76xf32> into tensor<1x1024x2x76xf32>
  %c = tensor.collapse_shape %l [[0], [1], [2, 3]] : tensor<1x1024x2x76xf32> into tensor<1x1024x152xf32>
  %loss = moe.cross_entropy %c, %t : tensor<1x1024x152xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_proj_dx(%x: tensor<1024x412xf32> {lm.param = "x"}, %wv: tensor<10x412x76xf32>, %g: tensor<1024x2x3xf32>, %i: tensor<1024x2x3xi32> {lm.vocab = 5 : i64}, %t: tensor<1x1024xi32> {lm.vocab = 152 : i64}) -> tensor<f32> {
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<1024x412xf32>, tensor<10x412x76xf32>, tensor<1024x2x3xf32>, tensor<1024x2x3xi32> -> tensor<1024x2x76xf32>
  %l = tensor.expand_shape %h [[0, 1], [2], [3]] output_shape [1, 1024, 2, 76] : tensor<1024x2x76xf32> into tensor<1x1024x2x76xf32>
  %c = tensor.collapse_shape %l [[0], [1], [2, 3]] : tensor<1x1024x2x76xf32> into tensor<1x1024x152xf32>
  %loss = moe.cross_entropy %c, %t : tensor<1x1024x152xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_proj_dw(%x: tensor<1024x412xf32>, %wv: tensor<10x412x76xf32> {lm.param = "wv"}, %g: tensor<1024x2x3xf32>, %i: tensor<1024x2x3xi32> {lm.vocab = 5 : i64}, %t: tensor<1x1024xi32> {lm.vocab = 152 : i64}) -> tensor<f32> {
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<1024x412xf32>, tensor<10x412x76xf32>, tensor<1024x2x3xf32>, tensor<1024x2x3xi32> -> tensor<1024x2x76xf32>
  %l = tensor.expand_shape %h [[0, 1], [2], [3]] output_shape [1, 1024, 2, 76] : tensor<1024x2x76xf32> into tensor<1x1024x2x76xf32>
  %c = tensor.collapse_shape %l [[0], [1], [2, 3]] : tensor<1x1024x2x76xf32> into tensor<1x1024x152xf32>
  %loss = moe.cross_entropy %c, %t : tensor<1x1024x152xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_merge(%o: tensor<512x2x76xf32> {lm.param = "o"}, %wo: tensor<10x76x412xf32> {lm.param = "wo"}, %g: tensor<512x2x3xf32> {lm.param = "g"}, %i: tensor<512x2x3xi32> {lm.vocab = 5 : i64}, %t: tensor<1x512xi32> {lm.vocab = 412 : i64}) -> tensor<f32> {
  %y = moe.expert_merge %o, %wo, %g, %i : tensor<512x2x76xf32>, tensor<10x76x412xf32>, tensor<512x2x3xf32>, tensor<512x2x3xi32> -> tensor<512x412xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 512, 412] : tensor<512x412xf32> into tensor<1x512x412xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x512x412xf32>, tensor<1x512xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_merge_dx(%o: tensor<512x2x76xf32> {lm.param = "o"}, %wo: tensor<10x76x412xf32>, %g: tensor<512x2x3xf32>, %i: tensor<512x2x3xi32> {lm.vocab = 5 : i64}, %t: tensor<1x512xi32> {lm.vocab = 412 : i64}) -> tensor<f32> {
  %y = moe.expert_merge %o, %wo, %g, %i : tensor<512x2x76xf32>, tensor<10x76x412xf32>, tensor<512x2x3xf32>, tensor<512x2x3xi32> -> tensor<512x412xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 512, 412] : tensor<512x412xf32> into tensor<1x512x412xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x512x412xf32>, tensor<1x512xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_merge_dw(%o: tensor<512x2x76xf32>, %wo: tensor<10x76x412xf32> {lm.param = "wo"}, %g: tensor<512x2x3xf32>, %i: tensor<512x2x3xi32> {lm.vocab = 5 : i64}, %t: tensor<1x512xi32> {lm.vocab = 412 : i64}) -> tensor<f32> {
  %y = moe.expert_merge %o, %wo, %g, %i : tensor<512x2x76xf32>, tensor<10x76x412xf32>, tensor<512x2x3xf32>, tensor<512x2x3xi32> -> tensor<512x412xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 512, 412] : tensor<512x412xf32> into tensor<1x512x412xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x512x412xf32>, tensor<1x512xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @attention_xl(%q: tensor<2x256x2x76xf32> {lm.param = "q"}, %k: tensor<2x512x2x76xf32> {lm.param = "k"}, %v: tensor<2x512x2x76xf32> {lm.param = "v"}, %r: tensor<512x2x76xf32> {lm.param = "r"}, %t: tensor<2x256xi32> {lm.vocab = 152 : i64}) -> tensor<f32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<512x2x76xf32>) : tensor<2x256x2x76xf32>, tensor<2x512x2x76xf32>, tensor<2x512x2x76xf32> -> tensor<2x256x2x76xf32>
  %l = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<2x256x2x76xf32> into tensor<2x256x152xf32>
  %loss = moe.cross_entropy %l, %t : tensor<2x256x152xf32>, tensor<2x256xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @attention_causal(%q: tensor<2x256x2x76xf32> {lm.param = "q"}, %k: tensor<2x256x2x76xf32> {lm.param = "k"}, %v: tensor<2x256x2x76xf32> {lm.param = "v"}, %t: tensor<2x256xi32> {lm.vocab = 152 : i64}) -> tensor<f32> {
  %o = moe.attention %q, %k, %v : tensor<2x256x2x76xf32>, tensor<2x256x2x76xf32>, tensor<2x256x2x76xf32> -> tensor<2x256x2x76xf32>
  %l = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<2x256x2x76xf32> into tensor<2x256x152xf32>
  %loss = moe.cross_entropy %l, %t : tensor<2x256x152xf32>, tensor<2x256xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// Losses through each op with a gradient rule, their inputs parameters
// (lm.param): compiled with their loss-and-gradient functions (@f_grad,
// lm-differentiate), whose loss and gradients the GPU and CPU backends must
// agree on (../op-gradients.test).
func.func @linear(%x: tensor<4x6xf32> {lm.param = "x"}, %w: tensor<5x6xf32> {lm.param = "w"}, %t: tensor<1x4xi32> {lm.vocab = 5 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w {scale = 0.7} : tensor<4x6xf32>, tensor<5x6xf32> -> tensor<4x5xf32>
  %relu = moe.relu %y : tensor<4x5xf32>
  %l = tensor.expand_shape %relu [[0, 1], [2]] output_shape [1, 4, 5] : tensor<4x5xf32> into tensor<1x4x5xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x4x5xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @switchhead_v(%x: tensor<5x6xf32> {lm.param = "x"}, %wg: tensor<6x6xf32> {lm.param = "wg"}, %wv: tensor<6x6x4xf32> {lm.param = "wv"}, %wo: tensor<6x4x6xf32> {lm.param = "wo"}, %t: tensor<1x5xi32> {lm.vocab = 6 : i64}) -> tensor<f32> {
  %s = moe.gate %x, %wg : tensor<5x6xf32>, tensor<6x6xf32> -> tensor<5x2x3xf32>
  %g, %i = moe.topk %s k(2) : tensor<5x2x3xf32> -> tensor<5x2x2xf32>, tensor<5x2x2xi32>
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<5x6xf32>, tensor<6x6x4xf32>, tensor<5x2x2xf32>, tensor<5x2x2xi32> -> tensor<5x2x4xf32>
  %y = moe.expert_merge %h, %wo, %g, %i : tensor<5x2x4xf32>, tensor<6x4x6xf32>, tensor<5x2x2xf32>, tensor<5x2x2xi32> -> tensor<5x6xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 5, 6] : tensor<5x6xf32> into tensor<1x5x6xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x5x6xf32>, tensor<1x5xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @expert_mlp(%x: tensor<5x6xf32> {lm.param = "x"}, %up: tensor<4x6x3xf32> {lm.param = "up"}, %down: tensor<4x3x6xf32> {lm.param = "down"}, %g: tensor<5x2xf32> {lm.param = "g"}, %i: tensor<5x2xi32> {lm.vocab = 4 : i64}, %t: tensor<1x5xi32> {lm.vocab = 6 : i64}) -> tensor<f32> {
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<5x6xf32>, tensor<4x6x3xf32>, tensor<4x3x6xf32>, tensor<5x2xf32>, tensor<5x2xi32> -> tensor<5x6xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 5, 6] : tensor<5x6xf32> into tensor<1x5x6xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x5x6xf32>, tensor<1x5xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @attention_rope(%q: tensor<1x4x2x8xf32> {lm.param = "q"}, %k: tensor<1x4x2x8xf32> {lm.param = "k"}, %v: tensor<1x4x2x8xf32> {lm.param = "v"}, %t: tensor<1x4xi32> {lm.vocab = 16 : i64}) -> tensor<f32> {
  %qr = moe.rope %q {offset = 2} : tensor<1x4x2x8xf32>
  %kr = moe.rope %k {offset = 2} : tensor<1x4x2x8xf32>
  %o = moe.attention %qr, %kr, %v : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32> -> tensor<1x4x2x8xf32>
  %l = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<1x4x2x8xf32> into tensor<1x4x16xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @attention_rel(%q: tensor<1x3x2x4xf32> {lm.param = "q"}, %k: tensor<1x5x2x4xf32> {lm.param = "k"}, %v: tensor<1x5x2x4xf32> {lm.param = "v"}, %r: tensor<5x2x4xf32> {lm.param = "r"}, %t: tensor<1x3xi32> {lm.vocab = 8 : i64}) -> tensor<f32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<5x2x4xf32>) : tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32> -> tensor<1x3x2x4xf32>
  %l = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<1x3x2x4xf32> into tensor<1x3x8xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x3x8xf32>, tensor<1x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @layer_norm(%x: tensor<2x3x6xf32> {lm.param = "x"}, %w: tensor<6xf32> {lm.param = "w"}, %b: tensor<6xf32> {lm.param = "b"}, %t: tensor<2x3xi32> {lm.vocab = 6 : i64}) -> tensor<f32> {
  %y = moe.layer_norm %x, %w, %b : tensor<2x3x6xf32>, tensor<6xf32>
  %loss = moe.cross_entropy %y, %t : tensor<2x3x6xf32>, tensor<2x3xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @embed_concat(%table: tensor<7x5xf32> {lm.param = "table"}, %tokens: tensor<1x3xi32> {lm.vocab = 7 : i64}, %a: tensor<1x2x5xf32> {lm.param = "a"}, %t: tensor<1x5xi32> {lm.vocab = 5 : i64}) -> tensor<f32> {
  %e = moe.embed %table, %tokens : tensor<7x5xf32>, tensor<1x3xi32> -> tensor<1x3x5xf32>
  %l = moe.concat %a, %e : tensor<1x2x5xf32>, tensor<1x3x5xf32> -> tensor<1x5x5xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x5x5xf32>, tensor<1x5xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @dropout(%x: tensor<4x5xf32> {lm.param = "x"}, %t: tensor<1x4xi32> {lm.vocab = 5 : i64}, %s: tensor<i64>) -> tensor<f32> {
  %m = moe.dropout_mask %x seed(%s) {rate = 0.4 : f64, stream = 2 : i64} : tensor<4x5xf32>, tensor<i64> -> tensor<4x5xi1>
  %y = moe.dropout %x, %m {rate = 0.4 : f64} : tensor<4x5xf32>, tensor<4x5xi1>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 4, 5] : tensor<4x5xf32> into tensor<1x4x5xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x4x5xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @routing_entropy(%x: tensor<4x6xf32> {lm.param = "x"}, %w: tensor<5x6xf32> {lm.param = "w"}, %s: tensor<3x6xf32> {lm.param = "s"}, %t: tensor<1x4xi32> {lm.vocab = 5 : i64}) -> tensor<f32> {
  %z = moe.linear %x, %s : tensor<4x6xf32>, tensor<3x6xf32> -> tensor<4x3xf32>
  %h = moe.routing_entropy %z : tensor<4x3xf32> -> tensor<f32>
  %y0 = moe.linear %x, %w : tensor<4x6xf32>, tensor<5x6xf32> -> tensor<4x5xf32>
  %y = moe.add_loss %y0, %h {weight = -0.3 : f64} : tensor<4x5xf32>, tensor<f32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 4, 5] : tensor<4x5xf32> into tensor<1x4x5xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x4x5xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

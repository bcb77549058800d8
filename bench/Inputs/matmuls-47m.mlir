// The dense matmuls of the paper's 47M models at batch 4 × 256 tokens
// (N = 1024, D 412), each alone with a cross-entropy loss over its output,
// for `switchyard-bench --kernels`: the output layer (vocabulary 8000), the
// FFN's up and down projections (d_ff 2080) and a query projection (2 heads
// × 76), and one expert's value and output projections at the shapes of the
// grouped formulation (SwitchHead's 5 experts, k 3: about 614 of the
// routes per expert and head; 76 ↔ 412 features). The loss-and-gradient
// function (lm-differentiate) of each runs the three matmuls of a training
// step: Y = X·Wᵀ, dX = dY·W and dW = dYᵀ·X.
func.func @linear_out(%x: tensor<1024x412xf32> {lm.param = "x"}, %w: tensor<8000x412xf32> {lm.param = "w"}, %t: tensor<1x1024xi32> {lm.vocab = 8000 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<1024x412xf32>, tensor<8000x412xf32> -> tensor<1024x8000xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1024, 8000] : tensor<1024x8000xf32> into tensor<1x1024x8000xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x1024x8000xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @linear_ffn_up(%x: tensor<1024x412xf32> {lm.param = "x"}, %w: tensor<2080x412xf32> {lm.param = "w"}, %t: tensor<1x1024xi32> {lm.vocab = 2080 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<1024x412xf32>, tensor<2080x412xf32> -> tensor<1024x2080xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1024, 2080] : tensor<1024x2080xf32> into tensor<1x1024x2080xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x1024x2080xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @linear_ffn_down(%x: tensor<1024x2080xf32> {lm.param = "x"}, %w: tensor<412x2080xf32> {lm.param = "w"}, %t: tensor<1x1024xi32> {lm.vocab = 412 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<1024x2080xf32>, tensor<412x2080xf32> -> tensor<1024x412xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1024, 412] : tensor<1024x412xf32> into tensor<1x1024x412xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x1024x412xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @linear_q(%x: tensor<1024x412xf32> {lm.param = "x"}, %w: tensor<152x412xf32> {lm.param = "w"}, %t: tensor<1x1024xi32> {lm.vocab = 152 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<1024x412xf32>, tensor<152x412xf32> -> tensor<1024x152xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 1024, 152] : tensor<1024x152xf32> into tensor<1x1024x152xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x1024x152xf32>, tensor<1x1024xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @linear_expert_v(%x: tensor<614x412xf32> {lm.param = "x"}, %w: tensor<76x412xf32> {lm.param = "w"}, %t: tensor<1x614xi32> {lm.vocab = 76 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<614x412xf32>, tensor<76x412xf32> -> tensor<614x76xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 614, 76] : tensor<614x76xf32> into tensor<1x614x76xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x614x76xf32>, tensor<1x614xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @linear_expert_o(%x: tensor<614x76xf32> {lm.param = "x"}, %w: tensor<412x76xf32> {lm.param = "w"}, %t: tensor<1x614xi32> {lm.vocab = 412 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<614x76xf32>, tensor<412x76xf32> -> tensor<614x412xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 614, 412] : tensor<614x412xf32> into tensor<1x614x412xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x614x412xf32>, tensor<1x614xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

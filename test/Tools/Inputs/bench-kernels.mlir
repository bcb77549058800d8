func.func @linear(%x: tensor<8x6xf32> {lm.param = "x"}, %w: tensor<5x6xf32> {lm.param = "w"}, %t: tensor<1x8xi32> {lm.vocab = 5 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<8x6xf32>, tensor<5x6xf32> -> tensor<8x5xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 8, 5] : tensor<8x5xf32> into tensor<1x8x5xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x8x5xf32>, tensor<1x8xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @plain(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %y = moe.relu %x : tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

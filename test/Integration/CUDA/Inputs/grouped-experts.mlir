// The grouped expert kernels at awkward sizes, forward and gradients
// (../grouped-experts.test): every expert of a head chosen by every token
// (k = E, H = 2, E = 3), and many experts with few routes (H = 1, E = 16,
// k = 1: with one token, one expert has a route and fifteen have none).
// The token count is dynamic.
func.func @all_experts(%x: tensor<?x8xf32> {lm.param = "x"}, %wg: tensor<6x8xf32> {lm.param = "wg"}, %wv: tensor<6x8x4xf32> {lm.param = "wv"}, %wo: tensor<6x4x8xf32> {lm.param = "wo"}, %t: tensor<?x1xi32> {lm.vocab = 8 : i64}) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %s = moe.gate %x, %wg : tensor<?x8xf32>, tensor<6x8xf32> -> tensor<?x2x3xf32>
  %g, %i = moe.topk %s k(3) : tensor<?x2x3xf32> -> tensor<?x2x3xf32>, tensor<?x2x3xi32>
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<?x8xf32>, tensor<6x8x4xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x4xf32>
  %y = moe.expert_merge %h, %wo, %g, %i : tensor<?x2x4xf32>, tensor<6x4x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x8xf32>
  %n = tensor.dim %y, %c0 : tensor<?x8xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [%n, 1, 8] : tensor<?x8xf32> into tensor<?x1x8xf32>
  %loss = moe.cross_entropy %l, %t : tensor<?x1x8xf32>, tensor<?x1xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @sparse_experts(%x: tensor<?x8xf32> {lm.param = "x"}, %wg: tensor<16x8xf32> {lm.param = "wg"}, %wv: tensor<16x8x4xf32> {lm.param = "wv"}, %wo: tensor<16x4x8xf32> {lm.param = "wo"}, %t: tensor<?x1xi32> {lm.vocab = 8 : i64}) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %s = moe.gate %x, %wg : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x1x16xf32>
  %g, %i = moe.topk %s k(1) : tensor<?x1x16xf32> -> tensor<?x1x1xf32>, tensor<?x1x1xi32>
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<?x8xf32>, tensor<16x8x4xf32>, tensor<?x1x1xf32>, tensor<?x1x1xi32> -> tensor<?x1x4xf32>
  %y = moe.expert_merge %h, %wo, %g, %i : tensor<?x1x4xf32>, tensor<16x4x8xf32>, tensor<?x1x1xf32>, tensor<?x1x1xi32> -> tensor<?x8xf32>
  %n = tensor.dim %y, %c0 : tensor<?x8xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [%n, 1, 8] : tensor<?x8xf32> into tensor<?x1x8xf32>
  %loss = moe.cross_entropy %l, %t : tensor<?x1x8xf32>, tensor<?x1xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

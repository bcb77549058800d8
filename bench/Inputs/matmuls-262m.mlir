// Matmuls for the GPU benchmark of the wgmma kernels (bench/gpu.sh, phase
// matmuls; issue "Matmuls at the chip's speed"): moe.linear (x·Wᵀ) with a
// cross-entropy over its output, for `switchyard-bench --kernels`, which
// times each forward and its loss-and-gradient function (dX and dW) against
// PyTorch's and a torch.mm of equal FLOPs in the same run. A square 4096³
// matmul, and the 262M model's projections at the paper's batch: 64
// sequences of 512 tokens, N = 32768 rows.

// A square bf16 matmul, 4096³ (the issue's reference point): 4096 x 4096 times 4096 x 4096.
func.func @linear_4096(%x: tensor<4096x4096xf32> {lm.param = "x"}, %w: tensor<4096x4096xf32> {lm.param = "w"}, %t: tensor<1x4096xi32> {lm.vocab = 4096 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<4096x4096xf32>, tensor<4096x4096xf32> -> tensor<4096x4096xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 4096, 4096] : tensor<4096x4096xf32> into tensor<1x4096x4096xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x4096x4096xf32>, tensor<1x4096xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// 262M dense attention's Q, K or V projection (16 heads × 64): 32768 x 1024 times 1024 x 1024.
func.func @linear_qkv_262m(%x: tensor<32768x1024xf32> {lm.param = "x"}, %w: tensor<1024x1024xf32> {lm.param = "w"}, %t: tensor<1x32768xi32> {lm.vocab = 1024 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<32768x1024xf32>, tensor<1024x1024xf32> -> tensor<32768x1024xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 32768, 1024] : tensor<32768x1024xf32> into tensor<1x32768x1024xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x32768x1024xf32>, tensor<1x32768xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// 262M feed-forward up-projection (d_ff 4096): 32768 x 1024 times 1024 x 4096.
func.func @linear_ffn_up_262m(%x: tensor<32768x1024xf32> {lm.param = "x"}, %w: tensor<4096x1024xf32> {lm.param = "w"}, %t: tensor<1x32768xi32> {lm.vocab = 4096 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<32768x1024xf32>, tensor<4096x1024xf32> -> tensor<32768x4096xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 32768, 4096] : tensor<32768x4096xf32> into tensor<1x32768x4096xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x32768x4096xf32>, tensor<1x32768xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// 262M feed-forward down-projection: 32768 x 4096 times 4096 x 1024.
func.func @linear_ffn_down_262m(%x: tensor<32768x4096xf32> {lm.param = "x"}, %w: tensor<1024x4096xf32> {lm.param = "w"}, %t: tensor<1x32768xi32> {lm.vocab = 1024 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<32768x4096xf32>, tensor<1024x4096xf32> -> tensor<32768x1024xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 32768, 1024] : tensor<32768x1024xf32> into tensor<1x32768x1024xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x32768x1024xf32>, tensor<1x32768xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// 262M output layer over the 8k SentencePiece vocabulary: 32768 x 1024 times 1024 x 8000.
func.func @linear_out_262m(%x: tensor<32768x1024xf32> {lm.param = "x"}, %w: tensor<8000x1024xf32> {lm.param = "w"}, %t: tensor<1x32768xi32> {lm.vocab = 8000 : i64}) -> tensor<f32> {
  %y = moe.linear %x, %w : tensor<32768x1024xf32>, tensor<8000x1024xf32> -> tensor<32768x8000xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 32768, 8000] : tensor<32768x8000xf32> into tensor<1x32768x8000xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x32768x8000xf32>, tensor<1x32768xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// Weight-gradient contractions (K = the dynamic token count, a small
// output) for switchyard-gpu-tensor-core-matmul's split-K (../split-k.test):
// dW = Xᵀ·dY into one tile (40 x 33), C += Xᵀ·dY into 3 x 2 tiles with a
// nonzero C, a batched one, and the grouped expert weight gradients
// (moe.grouped_weight_grad) of a SwitchHead value/output projection's loss.

#tx = affine_map<(i, o, t) -> (t, i)>
#tdy = affine_map<(i, o, t) -> (t, o)>
#tw = affine_map<(i, o, t) -> (i, o)>

func.func @weight_grad(%x: tensor<?x40xf32>, %dy: tensor<?x33xf32>) -> tensor<40x33xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<40x33xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<40x33xf32>) -> tensor<40x33xf32>
  %w = linalg.generic {indexing_maps = [#tx, #tdy, #tw],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : tensor<?x40xf32>, tensor<?x33xf32>) outs(%f : tensor<40x33xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<40x33xf32>
  return %w : tensor<40x33xf32>
}

func.func @weight_grad_accumulate(%x: tensor<?x130xf32>, %dy: tensor<?x72xf32>, %acc: tensor<130x72xf32>) -> tensor<130x72xf32> {
  %w = linalg.generic {indexing_maps = [#tx, #tdy, #tw],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : tensor<?x130xf32>, tensor<?x72xf32>) outs(%acc : tensor<130x72xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<130x72xf32>
  return %w : tensor<130x72xf32>
}

func.func @batched_weight_grad(%x: tensor<2x?x40xf32>, %dy: tensor<2x?x24xf32>) -> tensor<2x40x24xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x40x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x40x24xf32>) -> tensor<2x40x24xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(b, i, o, t) -> (b, t, i)>,
                                        affine_map<(b, i, o, t) -> (b, t, o)>,
                                        affine_map<(b, i, o, t) -> (b, i, o)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %dy : tensor<2x?x40xf32>, tensor<2x?x24xf32>) outs(%f : tensor<2x40x24xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x40x24xf32>
  return %w : tensor<2x40x24xf32>
}

// The loss of a SwitchHead value and output projection over a dynamic
// number of tokens: with --gradients --fusion none --experts grouped, the
// weight gradients of %wv and %wo are moe.grouped_weight_grad, one batch
// per expert.
func.func @switchhead_v(%x: tensor<?x6xf32> {lm.param = "x"}, %wg: tensor<6x6xf32> {lm.param = "wg"}, %wv: tensor<6x6x4xf32> {lm.param = "wv"}, %wo: tensor<6x4x6xf32> {lm.param = "wo"}, %t: tensor<1x?xi32> {lm.vocab = 6 : i64}) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x6xf32>
  %s = moe.gate %x, %wg : tensor<?x6xf32>, tensor<6x6xf32> -> tensor<?x2x3xf32>
  %g, %i = moe.topk %s k(2) : tensor<?x2x3xf32> -> tensor<?x2x2xf32>, tensor<?x2x2xi32>
  %h = moe.expert_proj %x, %wv, %g, %i : tensor<?x6xf32>, tensor<6x6x4xf32>, tensor<?x2x2xf32>, tensor<?x2x2xi32> -> tensor<?x2x4xf32>
  %y = moe.expert_merge %h, %wo, %g, %i : tensor<?x2x4xf32>, tensor<6x4x6xf32>, tensor<?x2x2xf32>, tensor<?x2x2xi32> -> tensor<?x6xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, %n, 6] : tensor<?x6xf32> into tensor<1x?x6xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x?x6xf32>, tensor<1x?xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

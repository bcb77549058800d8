// RUN: switchyard-opt %s -split-input-file -lm-differentiate -verify-diagnostics

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @no_rule(%x: tensor<2x3xf32> {lm.param = "x"}, %t: tensor<1x2xi32>) -> tensor<f32> {
  %e = tensor.empty() : tensor<2x3xf32>
  // expected-error @+1 {{'linalg.generic' op lies between a parameter and the loss of @no_rule but has no gradient rule}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %in : f32
    linalg.yield %m : f32
  } -> tensor<2x3xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 2, 3] : tensor<2x3xf32> into tensor<1x2x3xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x2x3xf32>, tensor<1x2xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op cannot be differentiated: expected its first result to be a loss (tensor<f32>) or logits [batch, time, vocab], found 'tensor<2x3xf32>'}}
func.func @not_a_loss(%x: tensor<2x3xf32> {lm.param = "x"}) -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}

// -----

// expected-error @+1 {{'func.func' op cannot be differentiated: logits need token ids [batch, time] as the first argument, to type the targets}}
func.func @no_tokens(%x: tensor<2x3x4xf32> {lm.param = "x"}) -> tensor<2x3x4xf32> {
  return %x : tensor<2x3x4xf32>
}

// Reductions of whole static tensors to one value, larger than one thread
// block takes (switchyard-split-whole-reductions, then
// switchyard-fuse-rows): a sum of squares over 152 x 412 elements (16
// rows of 3914) and a maximum over 10 x 412 x 76 (76 rows of 4120), as
// the gradient norm's are.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#to0d2 = affine_map<(d0, d1) -> ()>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#to0d3 = affine_map<(d0, d1, d2) -> ()>
func.func @sum_of_squares(%g: tensor<152x412xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [#id2, #to0d2], iterator_types = ["reduction", "reduction"]}
      ins(%g : tensor<152x412xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %r = arith.addf %out, %sq : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}
func.func @maximum(%v: tensor<10x412x76xf32>) -> tensor<f32> {
  %lowest = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%lowest : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %m = linalg.generic {indexing_maps = [#id3, #to0d3], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%v : tensor<10x412x76xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %out, %in : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %m : tensor<f32>
}

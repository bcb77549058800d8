// Reductions with too few threads, which switchyard-gpu-split-reductions
// turns into two parallel steps on the GPU (../reductions.test): static,
// three-dimensional (70 x 76 partial sums, themselves below min-elements:
// combined by one thread), a dynamic leading extent, a maximum, and one
// below the pass's min-elements (left to a single thread).
func.func @squared_norm(%g: tensor<100x130xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%g : tensor<100x130xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %out, %sq : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func @experts(%w: tensor<5x70x76xf32>) -> tensor<f32> {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%one : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> ()>],
                       iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%w : tensor<5x70x76xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = math.absf %in : f32
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func @dynamic_sum(%x: tensor<?x200xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<?x200xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = math.absf %in : f32
    %s = arith.addf %out, %a : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func @maximum(%x: tensor<90x120xf32>) -> tensor<f32> {
  %low = arith.constant -1.0e+30 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%low : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<90x120xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.maximumf %out, %in : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func @small(%x: tensor<6x7xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<6x7xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func @bias_gradient(%dy: tensor<?x100x30xf32>, %b: tensor<30xf32>) -> tensor<30xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>],
                       iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%dy : tensor<?x100x30xf32>) outs(%b : tensor<30xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = math.absf %in : f32
    %s = arith.addf %out, %a : f32
    linalg.yield %s : f32
  } -> tensor<30xf32>
  return %r : tensor<30xf32>
}

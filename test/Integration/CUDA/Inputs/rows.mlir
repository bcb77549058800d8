// Row reductions and the ops that read them, with rows longer than a
// thread block (switchyard-fuse-rows, switchyard-gpu-row-kernels): layer
// norms over 300 and 600 features, a cross-entropy over 700 classes, with
// their gradients (@f_grad); the row count is dynamic.
func.func @norm_300(%x: tensor<?x300xf32> {lm.param = "x"}, %w: tensor<300xf32> {lm.param = "w"}, %b: tensor<300xf32> {lm.param = "b"}, %t: tensor<1x?xi32> {lm.vocab = 300 : i64}) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x300xf32>
  %y = moe.layer_norm %x, %w, %b : tensor<?x300xf32>, tensor<300xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, %n, 300] : tensor<?x300xf32> into tensor<1x?x300xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x?x300xf32>, tensor<1x?xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @norm_600_classes_700(%x: tensor<?x600xf32> {lm.param = "x"}, %w: tensor<600xf32> {lm.param = "w"}, %b: tensor<600xf32> {lm.param = "b"}, %wo: tensor<700x600xf32> {lm.param = "wo"}, %t: tensor<1x?xi32> {lm.vocab = 700 : i64}) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x600xf32>
  %h = moe.layer_norm %x, %w, %b : tensor<?x600xf32>, tensor<600xf32>
  %y = moe.linear %h, %wo : tensor<?x600xf32>, tensor<700x600xf32> -> tensor<?x700xf32>
  %l = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, %n, 700] : tensor<?x700xf32> into tensor<1x?x700xf32>
  %loss = moe.cross_entropy %l, %t : tensor<1x?x700xf32>, tensor<1x?xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// One block of the paper's parameter-matched dense 47M baseline
// (examples/models/dense-47m.mlir) with its embedding, final norm and output
// layer: 10 heads of width 41, XL memory; FFN d_ff 2080. The dense
// counterpart of switchhead-47m-1block.mlir.
lm.model @dense_47m_1block(%tokens: tensor<?x256xi32>, %mem0: tensor<?x256x412xf32>) -> (tensor<?x256x8000xf32>, tensor<?x256x412xf32>) {
  %x0 = lm.embed "embed" %tokens {vocab = 8000} : tensor<?x256xi32> -> tensor<?x256x412xf32>
  %a0 = lm.mha "layers.0.att" %x0 memory(%mem0 : tensor<?x256x412xf32>) {heads = 10, head_dim = 41, pos = #lm.pos<xl>, dropout = 0.1} : tensor<?x256x412xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 2080, dropout = 0.1} : tensor<?x256x412xf32>
  %h = lm.layer_norm "norm" %x1 : tensor<?x256x412xf32>
  %logits = lm.output "out" %h {vocab = 8000} : tensor<?x256x412xf32> -> tensor<?x256x8000xf32>
  lm.return %logits, %x0 : tensor<?x256x8000xf32>, tensor<?x256x412xf32>
}

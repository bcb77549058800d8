// One block of the paper's 47M SwitchHead (examples/models/switchhead-47m.mlir)
// with its embedding, final norm and output layer: width 412, context 256,
// vocabulary 8000; 2 heads of width 76, 5 experts per head, k = 3, XL
// memory; FFN d_ff 2080. The benchmarks' one-block model (bench/cpu.sh):
// small enough to time at batch 4, every kind of kernel of the full model.
lm.model @switchhead_47m_1block(%tokens: tensor<?x256xi32>, %mem0: tensor<?x256x412xf32>) -> (tensor<?x256x8000xf32>, tensor<?x256x412xf32>) {
  %x0 = lm.embed "embed" %tokens {vocab = 8000} : tensor<?x256xi32> -> tensor<?x256x412xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 memory(%mem0 : tensor<?x256x412xf32>) {heads = 2, experts = 5, k = 3, head_dim = 76, pos = #lm.pos<xl>, dropout = 0.1} : tensor<?x256x412xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 2080, dropout = 0.1} : tensor<?x256x412xf32>
  %h = lm.layer_norm "norm" %x1 : tensor<?x256x412xf32>
  %logits = lm.output "out" %h {vocab = 8000} : tensor<?x256x412xf32> -> tensor<?x256x8000xf32>
  lm.return %logits, %x0 : tensor<?x256x8000xf32>, tensor<?x256x412xf32>
}

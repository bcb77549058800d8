// The paper's 262M dense Transformer-XL baseline (C4 setting): width 1024,
// 18 layers, context 512, vocabulary 8000, 16 heads of width 64, XL
// relative positions with one memory block, d_ff 4188, dropout 0.2.
lm.model @dense_262m(%tokens: tensor<?x512xi32>, %mem0: tensor<?x512x1024xf32>, %mem1: tensor<?x512x1024xf32>, %mem2: tensor<?x512x1024xf32>, %mem3: tensor<?x512x1024xf32>, %mem4: tensor<?x512x1024xf32>, %mem5: tensor<?x512x1024xf32>, %mem6: tensor<?x512x1024xf32>, %mem7: tensor<?x512x1024xf32>, %mem8: tensor<?x512x1024xf32>, %mem9: tensor<?x512x1024xf32>, %mem10: tensor<?x512x1024xf32>, %mem11: tensor<?x512x1024xf32>, %mem12: tensor<?x512x1024xf32>, %mem13: tensor<?x512x1024xf32>, %mem14: tensor<?x512x1024xf32>, %mem15: tensor<?x512x1024xf32>, %mem16: tensor<?x512x1024xf32>, %mem17: tensor<?x512x1024xf32>) -> (tensor<?x512x8000xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>) {
  %x0 = lm.embed "embed" %tokens {vocab = 8000} : tensor<?x512xi32> -> tensor<?x512x1024xf32>
  %a0 = lm.mha "layers.0.att" %x0 memory(%mem0 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a1 = lm.mha "layers.1.att" %x1 memory(%mem1 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a2 = lm.mha "layers.2.att" %x2 memory(%mem2 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x3 = lm.ffn "layers.2.ffn" %a2 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a3 = lm.mha "layers.3.att" %x3 memory(%mem3 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x4 = lm.ffn "layers.3.ffn" %a3 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a4 = lm.mha "layers.4.att" %x4 memory(%mem4 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x5 = lm.ffn "layers.4.ffn" %a4 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a5 = lm.mha "layers.5.att" %x5 memory(%mem5 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x6 = lm.ffn "layers.5.ffn" %a5 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a6 = lm.mha "layers.6.att" %x6 memory(%mem6 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x7 = lm.ffn "layers.6.ffn" %a6 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a7 = lm.mha "layers.7.att" %x7 memory(%mem7 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x8 = lm.ffn "layers.7.ffn" %a7 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a8 = lm.mha "layers.8.att" %x8 memory(%mem8 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x9 = lm.ffn "layers.8.ffn" %a8 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a9 = lm.mha "layers.9.att" %x9 memory(%mem9 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x10 = lm.ffn "layers.9.ffn" %a9 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a10 = lm.mha "layers.10.att" %x10 memory(%mem10 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x11 = lm.ffn "layers.10.ffn" %a10 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a11 = lm.mha "layers.11.att" %x11 memory(%mem11 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x12 = lm.ffn "layers.11.ffn" %a11 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a12 = lm.mha "layers.12.att" %x12 memory(%mem12 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x13 = lm.ffn "layers.12.ffn" %a12 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a13 = lm.mha "layers.13.att" %x13 memory(%mem13 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x14 = lm.ffn "layers.13.ffn" %a13 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a14 = lm.mha "layers.14.att" %x14 memory(%mem14 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x15 = lm.ffn "layers.14.ffn" %a14 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a15 = lm.mha "layers.15.att" %x15 memory(%mem15 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x16 = lm.ffn "layers.15.ffn" %a15 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a16 = lm.mha "layers.16.att" %x16 memory(%mem16 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x17 = lm.ffn "layers.16.ffn" %a16 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %a17 = lm.mha "layers.17.att" %x17 memory(%mem17 : tensor<?x512x1024xf32>) {heads = 16, head_dim = 64, pos = #lm.pos<xl>, dropout = 0.2} : tensor<?x512x1024xf32>
  %x18 = lm.ffn "layers.17.ffn" %a17 {d_ff = 4188, dropout = 0.2} : tensor<?x512x1024xf32>
  %h = lm.layer_norm "norm" %x18 : tensor<?x512x1024xf32>
  %logits = lm.output "out" %h {vocab = 8000} : tensor<?x512x1024xf32> -> tensor<?x512x8000xf32>
  lm.return %logits, %x0, %x1, %x2, %x3, %x4, %x5, %x6, %x7, %x8, %x9, %x10, %x11, %x12, %x13, %x14, %x15, %x16, %x17 : tensor<?x512x8000xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>, tensor<?x512x1024xf32>
}

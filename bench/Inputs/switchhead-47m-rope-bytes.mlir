// The 47M RoPE SwitchHead configuration (examples/models/switchhead-47m-rope.mlir:
// width 412, 16 layers, context 512, 2 heads of width 64, 5 experts, k = 3,
// d_ff 2092) with a byte vocabulary, for bench/generate.sh: generation
// reads and writes bytes.
lm.model @switchhead_47m_rope_bytes(%tokens: tensor<?x512xi32>) -> tensor<?x512x256xf32> {
  %x0 = lm.embed "embed" %tokens {vocab = 256} : tensor<?x512xi32> -> tensor<?x512x412xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a1 = lm.switchhead "layers.1.att" %x1 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a2 = lm.switchhead "layers.2.att" %x2 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x3 = lm.ffn "layers.2.ffn" %a2 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a3 = lm.switchhead "layers.3.att" %x3 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x4 = lm.ffn "layers.3.ffn" %a3 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a4 = lm.switchhead "layers.4.att" %x4 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x5 = lm.ffn "layers.4.ffn" %a4 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a5 = lm.switchhead "layers.5.att" %x5 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x6 = lm.ffn "layers.5.ffn" %a5 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a6 = lm.switchhead "layers.6.att" %x6 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x7 = lm.ffn "layers.6.ffn" %a6 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a7 = lm.switchhead "layers.7.att" %x7 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x8 = lm.ffn "layers.7.ffn" %a7 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a8 = lm.switchhead "layers.8.att" %x8 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x9 = lm.ffn "layers.8.ffn" %a8 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a9 = lm.switchhead "layers.9.att" %x9 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x10 = lm.ffn "layers.9.ffn" %a9 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a10 = lm.switchhead "layers.10.att" %x10 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x11 = lm.ffn "layers.10.ffn" %a10 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a11 = lm.switchhead "layers.11.att" %x11 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x12 = lm.ffn "layers.11.ffn" %a11 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a12 = lm.switchhead "layers.12.att" %x12 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x13 = lm.ffn "layers.12.ffn" %a12 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a13 = lm.switchhead "layers.13.att" %x13 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x14 = lm.ffn "layers.13.ffn" %a13 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a14 = lm.switchhead "layers.14.att" %x14 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x15 = lm.ffn "layers.14.ffn" %a14 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %a15 = lm.switchhead "layers.15.att" %x15 {heads = 2, experts = 5, k = 3, head_dim = 64, pos = #lm.pos<rope>, dropout = 0.1} : tensor<?x512x412xf32>
  %x16 = lm.ffn "layers.15.ffn" %a15 {d_ff = 2092, dropout = 0.1} : tensor<?x512x412xf32>
  %h = lm.layer_norm "norm" %x16 : tensor<?x512x412xf32>
  %logits = lm.output "out" %h {vocab = 256} : tensor<?x512x412xf32> -> tensor<?x512x256xf32>
  lm.return %logits : tensor<?x512x256xf32>
}

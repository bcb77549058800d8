// SwitchHead, tiny: the model of the tests and of the README's main job.
// Byte-level (vocabulary 256), context 128, width 128, 4 pre-LN layers.
// Attention: SwitchHead with 2 heads of width 32, 5 value and 5 output
// experts per head, 3 active (k), rotary positions. FFN: dense, 512 wide.
// Attention parameters per layer: 100,864 (see dense-tiny.mlir, matched).
lm.model @switchhead_tiny(%tokens: tensor<?x128xi32>) -> tensor<?x128x256xf32> {
  %x0 = lm.embed "embed" %tokens {vocab = 256} : tensor<?x128xi32> -> tensor<?x128x128xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 512} : tensor<?x128x128xf32>
  %a1 = lm.switchhead "layers.1.att" %x1 {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 512} : tensor<?x128x128xf32>
  %a2 = lm.switchhead "layers.2.att" %x2 {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x3 = lm.ffn "layers.2.ffn" %a2 {d_ff = 512} : tensor<?x128x128xf32>
  %a3 = lm.switchhead "layers.3.att" %x3 {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x4 = lm.ffn "layers.3.ffn" %a3 {d_ff = 512} : tensor<?x128x128xf32>
  %h = lm.layer_norm "norm" %x4 : tensor<?x128x128xf32>
  %logits = lm.output "out" %h {vocab = 256} : tensor<?x128x128xf32> -> tensor<?x128x256xf32>
  lm.return %logits : tensor<?x128x256xf32>
}

// Dense baseline for switchhead-tiny.mlir, parameter-matched: 4 heads of
// width 48 give 98,304 attention parameters per layer (SwitchHead: 100,864).
// Everything else (vocabulary, context, width, depth, FFN, RoPE) is the same.
lm.model @dense_tiny(%tokens: tensor<?x128xi32>) -> tensor<?x128x256xf32> {
  %x0 = lm.embed "embed" %tokens {vocab = 256} : tensor<?x128xi32> -> tensor<?x128x128xf32>
  %a0 = lm.mha "layers.0.att" %x0 {heads = 4, head_dim = 48, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 512} : tensor<?x128x128xf32>
  %a1 = lm.mha "layers.1.att" %x1 {heads = 4, head_dim = 48, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 512} : tensor<?x128x128xf32>
  %a2 = lm.mha "layers.2.att" %x2 {heads = 4, head_dim = 48, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x3 = lm.ffn "layers.2.ffn" %a2 {d_ff = 512} : tensor<?x128x128xf32>
  %a3 = lm.mha "layers.3.att" %x3 {heads = 4, head_dim = 48, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x4 = lm.ffn "layers.3.ffn" %a3 {d_ff = 512} : tensor<?x128x128xf32>
  %h = lm.layer_norm "norm" %x4 : tensor<?x128x128xf32>
  %logits = lm.output "out" %h {vocab = 256} : tensor<?x128x128xf32> -> tensor<?x128x256xf32>
  lm.return %logits : tensor<?x128x256xf32>
}

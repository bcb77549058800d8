// A small Transformer-XL SwitchHead model for the end-to-end test:
// context 8, width 16, two layers, each with a memory block.
lm.model @xl_small(%tokens: tensor<?x8xi32>, %mem0: tensor<?x8x16xf32>, %mem1: tensor<?x8x16xf32>) -> (tensor<?x8x256xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32>) {
  %x0 = lm.embed "embed" %tokens {vocab = 256} : tensor<?x8xi32> -> tensor<?x8x16xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 memory(%mem0 : tensor<?x8x16xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x8x16xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 32} : tensor<?x8x16xf32>
  %a1 = lm.switchhead "layers.1.att" %x1 memory(%mem1 : tensor<?x8x16xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x8x16xf32>
  %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 32} : tensor<?x8x16xf32>
  %h = lm.layer_norm "norm" %x2 : tensor<?x8x16xf32>
  %logits = lm.output "out" %h {vocab = 256} : tensor<?x8x16xf32> -> tensor<?x8x256xf32>
  lm.return %logits, %x0, %x1 : tensor<?x8x256xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32>
}

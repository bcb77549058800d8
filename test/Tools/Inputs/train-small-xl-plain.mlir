// A small byte-level SwitchHead model with a Transformer-XL memory and no
// dropout: its training does not depend on how the batch is shared out.
lm.model @train_small_xl_plain(%t: tensor<?x16xi32>, %m0: tensor<?x16x16xf32>) -> (tensor<?x16x256xf32>, tensor<?x16x16xf32>) {
  %x0 = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x16xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x16x16xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x16x16xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 32} : tensor<?x16x16xf32>
  %h = lm.layer_norm "norm" %x1 : tensor<?x16x16xf32>
  %l = lm.output "out" %h {vocab = 256} : tensor<?x16x16xf32> -> tensor<?x16x256xf32>
  lm.return %l, %x0 : tensor<?x16x256xf32>, tensor<?x16x16xf32>
}

// switchhead-tiny with Transformer-XL relative positions and one memory
// block. Argument %memI is layer I's block input from the previous segment
// (zeros for the first); the model returns this segment's block inputs
// after the logits, in layer order, to be fed back as the next memories.
lm.model @switchhead_tiny_xl(%tokens: tensor<?x128xi32>, %mem0: tensor<?x128x128xf32>, %mem1: tensor<?x128x128xf32>, %mem2: tensor<?x128x128xf32>, %mem3: tensor<?x128x128xf32>) -> (tensor<?x128x256xf32>, tensor<?x128x128xf32>, tensor<?x128x128xf32>, tensor<?x128x128xf32>, tensor<?x128x128xf32>) {
  %x0 = lm.embed "embed" %tokens {vocab = 256} : tensor<?x128xi32> -> tensor<?x128x128xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 memory(%mem0 : tensor<?x128x128xf32>) {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<xl>} : tensor<?x128x128xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 512} : tensor<?x128x128xf32>
  %a1 = lm.switchhead "layers.1.att" %x1 memory(%mem1 : tensor<?x128x128xf32>) {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<xl>} : tensor<?x128x128xf32>
  %x2 = lm.ffn "layers.1.ffn" %a1 {d_ff = 512} : tensor<?x128x128xf32>
  %a2 = lm.switchhead "layers.2.att" %x2 memory(%mem2 : tensor<?x128x128xf32>) {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<xl>} : tensor<?x128x128xf32>
  %x3 = lm.ffn "layers.2.ffn" %a2 {d_ff = 512} : tensor<?x128x128xf32>
  %a3 = lm.switchhead "layers.3.att" %x3 memory(%mem3 : tensor<?x128x128xf32>) {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<xl>} : tensor<?x128x128xf32>
  %x4 = lm.ffn "layers.3.ffn" %a3 {d_ff = 512} : tensor<?x128x128xf32>
  %h = lm.layer_norm "norm" %x4 : tensor<?x128x128xf32>
  %logits = lm.output "out" %h {vocab = 256} : tensor<?x128x128xf32> -> tensor<?x128x256xf32>
  lm.return %logits, %x0, %x1, %x2, %x3 : tensor<?x128x256xf32>, tensor<?x128x128xf32>, tensor<?x128x128xf32>, tensor<?x128x128xf32>, tensor<?x128x128xf32>
}

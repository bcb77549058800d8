// A model whose logits for a large batch outgrow any machine: 2^20 ids,
// 4096 sequences of 128 positions: 2 TiB of f32 logits.
lm.model @big_vocab(%t: tensor<?x128xi32>) -> tensor<?x128x1048576xf32> {
  %x = lm.embed "embed" %t {vocab = 1048576} : tensor<?x128xi32> -> tensor<?x128x16xf32>
  %l = lm.output "out" %x {vocab = 1048576} : tensor<?x128x16xf32> -> tensor<?x128x1048576xf32>
  lm.return %l : tensor<?x128x1048576xf32>
}

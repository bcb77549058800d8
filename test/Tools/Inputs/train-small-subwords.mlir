// The small SwitchHead model of the CLI tests with a vocabulary of 512
// SentencePiece subwords (byte fallback needs 256 pieces and more).
lm.model @train_small_subwords(%t: tensor<?x16xi32>) -> tensor<?x16x512xf32> {
  %x0 = lm.embed "embed" %t {vocab = 512} : tensor<?x16xi32> -> tensor<?x16x16xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x16x16xf32>
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 32} : tensor<?x16x16xf32>
  %h = lm.layer_norm "norm" %x1 : tensor<?x16x16xf32>
  %l = lm.output "out" %h {vocab = 512} : tensor<?x16x16xf32> -> tensor<?x16x512xf32>
  lm.return %l : tensor<?x16x512xf32>
}

// Well-formed syntax, but k exceeds the experts: a verifier error.
lm.model @bad(%t: tensor<?x8xi32>) -> tensor<?x8x256xf32> {
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x8xi32> -> tensor<?x8x16xf32>
  %a = lm.switchhead "layers.0.att" %x {heads = 2, experts = 4, k = 5, head_dim = 4} : tensor<?x8x16xf32>
  %l = lm.output "out" %a {vocab = 256} : tensor<?x8x16xf32> -> tensor<?x8x256xf32>
  lm.return %l : tensor<?x8x256xf32>
}

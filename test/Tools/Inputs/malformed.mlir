// A model with a syntax error on line 4 (the result type is missing).
lm.model @broken(%t: tensor<?x8xi32>) -> tensor<?x8x256xf32> {
  %x = lm.embed "embed" %t {vocab = 256} : tensor<?x8xi32> -> tensor<?x8x16xf32>
  %l = lm.output "out" %x {vocab = 256}
  lm.return %l : tensor<?x8x256xf32>
}

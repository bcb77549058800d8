// Within every size limit, but its parameters (2 × 2^36 floats, 550 GB)
// fit no machine.
lm.model @huge_params(%t: tensor<?x8xi32>) -> tensor<?x8x16777216xf32> {
  %x = lm.embed "embed" %t {vocab = 16777216} : tensor<?x8xi32> -> tensor<?x8x4096xf32>
  %l = lm.output "out" %x {vocab = 16777216} : tensor<?x8x4096xf32> -> tensor<?x8x16777216xf32>
  lm.return %l : tensor<?x8x16777216xf32>
}

// One token argument feeding two tables of different sizes: ids must fit
// the smaller one.
lm.model @two_tables(%t: tensor<?x8xi32>) -> tensor<?x8x16xf32> {
  %a = lm.embed "small" %t {vocab = 100} : tensor<?x8xi32> -> tensor<?x8x16xf32>
  %b = lm.embed "big" %t {vocab = 300} : tensor<?x8xi32> -> tensor<?x8x16xf32>
  %s = arith.addf %a, %b : tensor<?x8x16xf32>
  lm.return %s : tensor<?x8x16xf32>
}

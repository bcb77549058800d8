// The grouped expert projection with a dynamic choice count (3 at
// --dynamic-size 3, with repeats; ../grouped-experts.test): the rows
// scattered into the padded order instead of gathered by the kernels.
func.func @dynamic_choices(%x: tensor<?x8xf32>, %w: tensor<10x8x4xf32>, %g: tensor<?x2x?xf32>, %i: tensor<?x2x?xi32> {lm.vocab = 5 : i64}) -> tensor<?x2x4xf32> {
  %h = moe.expert_proj %x, %w, %g, %i : tensor<?x8xf32>, tensor<10x8x4xf32>, tensor<?x2x?xf32>, tensor<?x2x?xi32> -> tensor<?x2x4xf32>
  return %h : tensor<?x2x4xf32>
}

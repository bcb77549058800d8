// Attention shapes for the tensor-core flash attention (attention.test):
// moe.attention, which moe-fuse-attention makes moe.flash_attention and
// the GPU pipelines with tensor cores moe.flash_attention_kernel. The batch
// is dynamic (--dynamic-size). Query counts 130 (three 64-row blocks, the
// last partial) and 17; keys as many, or 40 (XL memory: 23 keys ahead of
// the queries, visible to all of them); head widths 32, 64 (multiples of
// the 16-wide k step), 24 (padded to 32) and 128 (the widest the kernel
// takes).

func.func @t130_f32(%q: tensor<?x130x2x32xf32>, %k: tensor<?x130x2x32xf32>, %v: tensor<?x130x2x32xf32>) -> tensor<?x130x2x32xf32> {
  %o = moe.attention %q, %k, %v : tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32>, tensor<?x130x2x32xf32> -> tensor<?x130x2x32xf32>
  return %o : tensor<?x130x2x32xf32>
}
func.func @t17_s40_f24(%q: tensor<?x17x3x24xf32>, %k: tensor<?x40x3x24xf32>, %v: tensor<?x40x3x24xf32>) -> tensor<?x17x3x24xf32> {
  %o = moe.attention %q, %k, %v : tensor<?x17x3x24xf32>, tensor<?x40x3x24xf32>, tensor<?x40x3x24xf32> -> tensor<?x17x3x24xf32>
  return %o : tensor<?x17x3x24xf32>
}
func.func @t70_s100_f64(%q: tensor<?x70x1x64xf32>, %k: tensor<?x100x1x64xf32>, %v: tensor<?x100x1x64xf32>) -> tensor<?x70x1x64xf32> {
  %o = moe.attention %q, %k, %v : tensor<?x70x1x64xf32>, tensor<?x100x1x64xf32>, tensor<?x100x1x64xf32> -> tensor<?x70x1x64xf32>
  return %o : tensor<?x70x1x64xf32>
}
func.func @t20_f128(%q: tensor<?x20x1x128xf32>, %k: tensor<?x20x1x128xf32>, %v: tensor<?x20x1x128xf32>) -> tensor<?x20x1x128xf32> {
  %o = moe.attention %q, %k, %v : tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32>, tensor<?x20x1x128xf32> -> tensor<?x20x1x128xf32>
  return %o : tensor<?x20x1x128xf32>
}

// One σ-MoE feed-forward block at the sizes of the official fixture
// (Inputs/switchhead-official/sigma_moe.json).
lm.model @sigma_moe_block(%x: tensor<?x11x64xf32>) -> tensor<?x11x64xf32> {
  %y = lm.sigma_moe "layers.0.ffn" %x {experts = 8, k = 2, expert_dim = 32} : tensor<?x11x64xf32>
  lm.return %y : tensor<?x11x64xf32>
}

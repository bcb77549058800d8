// A small byte-level SwitchAll model with a Transformer-XL memory and every
// training option: residual dropout, expert dropout on both attention
// selections and the sigma-MoE, and the sigma-MoE entropy regulariser.
lm.model @train_small_xl(%t: tensor<?x16xi32>, %m0: tensor<?x16x16xf32>) -> (tensor<?x16x256xf32>, tensor<?x16x16xf32>) {
  %x0 = lm.embed "embed" %t {vocab = 256} : tensor<?x16xi32> -> tensor<?x16x16xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x16x16xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>, expert_dropout = 0.2, dropout = 0.1} : tensor<?x16x16xf32>
  %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 4, k = 2, expert_dim = 8, expert_dropout = 0.1, entropy_reg = 0.001, dropout = 0.1} : tensor<?x16x16xf32>
  %h = lm.layer_norm "norm" %x1 : tensor<?x16x16xf32>
  %l = lm.output "out" %h {vocab = 256} : tensor<?x16x16xf32> -> tensor<?x16x256xf32>
  lm.return %l, %x0 : tensor<?x16x256xf32>, tensor<?x16x16xf32>
}

// SwitchAll, tiny: switchhead-tiny with sigma-MoE feed-forward blocks
// (8 experts of width 64, 2 active; 8·64 = 512 = the dense d_ff).
lm.model @switchall_tiny(%tokens: tensor<?x128xi32>) -> tensor<?x128x256xf32> {
  %x0 = lm.embed "embed" %tokens {vocab = 256} : tensor<?x128xi32> -> tensor<?x128x128xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 8, k = 2, expert_dim = 64} : tensor<?x128x128xf32>
  %a1 = lm.switchhead "layers.1.att" %x1 {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x2 = lm.sigma_moe "layers.1.ffn" %a1 {experts = 8, k = 2, expert_dim = 64} : tensor<?x128x128xf32>
  %a2 = lm.switchhead "layers.2.att" %x2 {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x3 = lm.sigma_moe "layers.2.ffn" %a2 {experts = 8, k = 2, expert_dim = 64} : tensor<?x128x128xf32>
  %a3 = lm.switchhead "layers.3.att" %x3 {heads = 2, experts = 5, k = 3, head_dim = 32, pos = #lm.pos<rope>} : tensor<?x128x128xf32>
  %x4 = lm.sigma_moe "layers.3.ffn" %a3 {experts = 8, k = 2, expert_dim = 64} : tensor<?x128x128xf32>
  %h = lm.layer_norm "norm" %x4 : tensor<?x128x128xf32>
  %logits = lm.output "out" %h {vocab = 256} : tensor<?x128x128xf32> -> tensor<?x128x256xf32>
  lm.return %logits : tensor<?x128x256xf32>
}

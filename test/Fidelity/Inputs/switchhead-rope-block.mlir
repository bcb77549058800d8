// One SwitchHead block with rotary positions at the sizes of the official
// fixtures' RoPE case (Inputs/switchhead-official/cases.json).
lm.model @switchhead_rope_block(%x: tensor<?x11x64xf32>) -> tensor<?x11x64xf32> {
  %y = lm.switchhead "layers.0.att" %x {heads = 4, experts = 4, k = 2, head_dim = 16, pos = #lm.pos<rope>} : tensor<?x11x64xf32>
  lm.return %y : tensor<?x11x64xf32>
}

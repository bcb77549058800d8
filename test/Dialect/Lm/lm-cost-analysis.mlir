// RUN: switchyard-opt %s --switchyard-frontend-pipeline --lm-decompose-layers --lm-cost-analysis -verify-diagnostics | FileCheck %s

// A dense RoPE layer (d 32, T 16, 2 heads of width 8, no memory): the IR
// count equals the formula with c = 0. MACs: q, k, v, o 16·32·16 = 8192
// each, QKᵀ and A·V 16·16·16 = 4096 each: 40960 = 2·16·16·16 + 4·32·16·16.
// Memory: q, k, v, heads 256 each + 2·2·16·16 = 2048 = 2·2·256 + 4·16·16.
// FFN: 2·16·32·64 = 65536 MACs; output head 16·32·16 = 8192.
// The analysis changes nothing.

// CHECK-LABEL: lm.model @dense_rope
// CHECK: moe.attention
// expected-remark @below {{@dense_rope: attention 40960 MACs (formula 40960), 2048 floats (formula 2048); model 114688 MACs}}
lm.model @dense_rope(%tokens: tensor<?x16xi32>) -> tensor<?x16x16xf32> {
  %x0 = lm.embed "embed" %tokens {vocab = 16} : tensor<?x16xi32> -> tensor<?x16x32xf32>
  // expected-remark @below {{layers.0.att: dense-attention, 40960 MACs (formula 40960), 2048 floats kept (formula 2048)}}
  %a0 = lm.mha "layers.0.att" %x0 {heads = 2, head_dim = 8, pos = #lm.pos<rope>} : tensor<?x16x32xf32>
  // expected-remark @below {{layers.0.ffn: ffn, 65536 MACs (formula 65536)}}
  %x1 = lm.ffn "layers.0.ffn" %a0 {d_ff = 64} : tensor<?x16x32xf32>
  %h = lm.layer_norm "norm" %x1 : tensor<?x16x32xf32>
  // expected-remark @below {{out: output, 8192 MACs}}
  %logits = lm.output "out" %h {vocab = 16} : tensor<?x16x32xf32> -> tensor<?x16x16xf32>
  lm.return %logits : tensor<?x16x16xf32>
}

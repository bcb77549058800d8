// One function per moe op kind, on awkward shapes: the forward pass of each
// op, run on the GPU and on the CPU backend by switchyard-gpu-check
// (../ops.test). Index arguments carry lm.vocab: the range of their values.
func.func @gate(%x: tensor<6x5xf32>, %w: tensor<12x5xf32>) -> tensor<6x2x6xf32> {
  %s = moe.gate %x, %w : tensor<6x5xf32>, tensor<12x5xf32> -> tensor<6x2x6xf32>
  return %s : tensor<6x2x6xf32>
}
func.func @gate_dynamic(%x: tensor<?x13xf32>, %w: tensor<15x13xf32>) -> tensor<?x15xf32> {
  %s = moe.gate %x, %w : tensor<?x13xf32>, tensor<15x13xf32> -> tensor<?x15xf32>
  return %s : tensor<?x15xf32>
}
func.func @topk(%s: tensor<6x2x6xf32>) -> (tensor<6x2x3xf32>, tensor<6x2x3xi32>) {
  %v, %i = moe.topk %s k(3) : tensor<6x2x6xf32> -> tensor<6x2x3xf32>, tensor<6x2x3xi32>
  return %v, %i : tensor<6x2x3xf32>, tensor<6x2x3xi32>
}
func.func @topk_all(%s: tensor<7x5xf32>) -> (tensor<7x5xf32>, tensor<7x5xi64>) {
  %v, %i = moe.topk %s k(5) : tensor<7x5xf32> -> tensor<7x5xf32>, tensor<7x5xi64>
  return %v, %i : tensor<7x5xf32>, tensor<7x5xi64>
}
func.func @topk_masked(%s: tensor<7x5xf32>, %m: tensor<7x5xi1>) -> (tensor<7x1xf32>, tensor<7x1xi64>) {
  %v, %i = moe.topk %s k(1) mask(%m) : tensor<7x5xf32>, tensor<7x5xi1> -> tensor<7x1xf32>, tensor<7x1xi64>
  return %v, %i : tensor<7x1xf32>, tensor<7x1xi64>
}
func.func @expert_proj(%x: tensor<5x6xf32>, %w: tensor<6x6x4xf32>, %g: tensor<5x2x2xf32>, %i: tensor<5x2x2xi32> {lm.vocab = 3 : i64}) -> tensor<5x2x4xf32> {
  %y = moe.expert_proj %x, %w, %g, %i : tensor<5x6xf32>, tensor<6x6x4xf32>, tensor<5x2x2xf32>, tensor<5x2x2xi32> -> tensor<5x2x4xf32>
  return %y : tensor<5x2x4xf32>
}
func.func @expert_merge(%h: tensor<5x2x4xf32>, %w: tensor<6x4x6xf32>, %g: tensor<5x2x2xf32>, %i: tensor<5x2x2xi32> {lm.vocab = 3 : i64}) -> tensor<5x6xf32> {
  %y = moe.expert_merge %h, %w, %g, %i : tensor<5x2x4xf32>, tensor<6x4x6xf32>, tensor<5x2x2xf32>, tensor<5x2x2xi32> -> tensor<5x6xf32>
  return %y : tensor<5x6xf32>
}
func.func @expert_mlp(%x: tensor<5x6xf32>, %up: tensor<4x6x3xf32>, %down: tensor<4x3x6xf32>, %g: tensor<5x2xf32>, %i: tensor<5x2xi32> {lm.vocab = 4 : i64}) -> tensor<5x6xf32> {
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<5x6xf32>, tensor<4x6x3xf32>, tensor<4x3x6xf32>, tensor<5x2xf32>, tensor<5x2xi32> -> tensor<5x6xf32>
  return %y : tensor<5x6xf32>
}
func.func @attention(%q: tensor<2x4x2x3xf32>, %k: tensor<2x4x2x3xf32>, %v: tensor<2x4x2x3xf32>) -> tensor<2x4x2x3xf32> {
  %o = moe.attention %q, %k, %v : tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32> -> tensor<2x4x2x3xf32>
  return %o : tensor<2x4x2x3xf32>
}
func.func @attention_rel(%q: tensor<1x3x2x4xf32>, %k: tensor<1x5x2x4xf32>, %v: tensor<1x5x2x4xf32>, %r: tensor<5x2x4xf32>) -> tensor<1x3x2x4xf32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<5x2x4xf32>) : tensor<1x3x2x4xf32>, tensor<1x5x2x4xf32>, tensor<1x5x2x4xf32> -> tensor<1x3x2x4xf32>
  return %o : tensor<1x3x2x4xf32>
}
func.func @linear(%x: tensor<4x6xf32>, %w: tensor<5x6xf32>) -> tensor<4x5xf32> {
  %y = moe.linear %x, %w : tensor<4x6xf32>, tensor<5x6xf32> -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}
func.func @linear_scaled(%x: tensor<4x6xf32>, %w: tensor<5x6xf32>) -> tensor<4x5xf32> {
  %y = moe.linear %x, %w {scale = 0.7} : tensor<4x6xf32>, tensor<5x6xf32> -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}
func.func @layer_norm(%x: tensor<2x3x6xf32>, %w: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<2x3x6xf32> {
  %y = moe.layer_norm %x, %w, %b : tensor<2x3x6xf32>, tensor<6xf32>
  return %y : tensor<2x3x6xf32>
}
func.func @rope(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  %y = moe.rope %x {offset = 2} : tensor<1x4x2x8xf32>
  return %y : tensor<1x4x2x8xf32>
}
func.func @relu(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %y = moe.relu %x : tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}
func.func @embed(%table: tensor<7x5xf32>, %tokens: tensor<1x3xi32> {lm.vocab = 7 : i64}) -> tensor<1x3x5xf32> {
  %e = moe.embed %table, %tokens : tensor<7x5xf32>, tensor<1x3xi32> -> tensor<1x3x5xf32>
  return %e : tensor<1x3x5xf32>
}
func.func @concat(%a: tensor<1x2x5xf32>, %e: tensor<1x3x5xf32>) -> tensor<1x5x5xf32> {
  %c = moe.concat %a, %e : tensor<1x2x5xf32>, tensor<1x3x5xf32> -> tensor<1x5x5xf32>
  return %c : tensor<1x5x5xf32>
}
func.func @cross_entropy(%l: tensor<1x4x5xf32>, %t: tensor<1x4xi32> {lm.vocab = 5 : i64}) -> tensor<f32> {
  %loss = moe.cross_entropy %l, %t : tensor<1x4x5xf32>, tensor<1x4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @dropout_mask(%x: tensor<4x5xf32>, %s: tensor<i64>) -> tensor<4x5xi1> {
  %m = moe.dropout_mask %x seed(%s) {rate = 0.4 : f64, stream = 2 : i64} : tensor<4x5xf32>, tensor<i64> -> tensor<4x5xi1>
  return %m : tensor<4x5xi1>
}
func.func @dropout(%x: tensor<4x5xf32>, %m: tensor<4x5xi1>) -> tensor<4x5xf32> {
  %y = moe.dropout %x, %m {rate = 0.4 : f64} : tensor<4x5xf32>, tensor<4x5xi1>
  return %y : tensor<4x5xf32>
}
func.func @routing_entropy(%z: tensor<6x5xf32>) -> tensor<f32> {
  %h = moe.routing_entropy %z : tensor<6x5xf32> -> tensor<f32>
  return %h : tensor<f32>
}
func.func @add_loss(%y: tensor<4x5xf32>, %h: tensor<f32>) -> tensor<4x5xf32> {
  %r = moe.add_loss %y, %h {weight = -0.3 : f64} : tensor<4x5xf32>, tensor<f32>
  return %r : tensor<4x5xf32>
}

// RUN: switchyard-opt %s --convert-moe-to-linalg | FileCheck %s
// RUN: switchyard-opt %s --convert-moe-to-linalg --switchyard-cpu-pipeline -o /dev/null

// Every moe op becomes linalg on tensors; nothing of moe is left. The
// numerics are checked against the C++ reference in test/unit.

// CHECK-LABEL: func.func @gate
// CHECK: %[[LOGITS:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[SIG:.*]] = linalg.generic {{.*}}ins(%[[LOGITS]] : tensor<?x6xf32>)
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: tensor.expand_shape %[[SIG]] {{\[}}[0], [1, 2]] {{.*}} : tensor<?x6xf32> into tensor<?x2x3xf32>
// CHECK-NOT: moe.
func.func @gate(%x: tensor<?x16xbf16>, %w: tensor<6x16xbf16>) -> tensor<?x2x3xf32> {
  %s = moe.gate %x, %w : tensor<?x16xbf16>, tensor<6x16xbf16> -> tensor<?x2x3xf32>
  return %s : tensor<?x2x3xf32>
}

// Top-k: one generic over the output slots, two nested loops over experts
// computing ranks; the mask turns scores into -inf keys.
// CHECK-LABEL: func.func @topk
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} outs(%{{.*}}, %{{.*}} : tensor<?x3xf32>, tensor<?x3xi64>)
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.select {{.*}} : f32
// CHECK: arith.cmpf ogt
// CHECK-NOT: moe.
func.func @topk(%s: tensor<?x5xf32>, %m: tensor<?x5xi1>) -> (tensor<?x3xf32>, tensor<?x3xi64>) {
  %v, %i = moe.topk %s k(3) mask(%m) : tensor<?x5xf32>, tensor<?x5xi1> -> tensor<?x3xf32>, tensor<?x3xi64>
  return %v, %i : tensor<?x3xf32>, tensor<?x3xi64>
}

// The projections (unfused) in the dense all-experts formulation: every
// token through every expert of its head in one contraction over the V
// weight viewed as [H, E, D, F], then the sum over the experts weighted by
// the dense gates G [N, H, E] (the routes' gates at their experts, 0
// elsewhere). The merge spreads the heads over the experts (A = G · heads),
// flattens (h, e, f) and multiplies by the O weight as [H·E·F, D].
// CHECK-LABEL: func.func @projections
// CHECK: %[[WV:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3]] output_shape [2, 5, 16, 8] : tensor<10x16x8xf32> into tensor<2x5x16x8xf32>
// CHECK: %[[P:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %[[WV]] : tensor<?x16xf32>, tensor<2x5x16x8xf32>) outs(%{{.*}} : tensor<?x2x5x8xf32>)
// CHECK: %[[G:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<?x2x3xf32>, tensor<?x2x3xi32>) outs(%{{.*}} : tensor<?x2x5xf32>)
// CHECK: arith.cmpi eq
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[P]], %[[G]] : tensor<?x2x5x8xf32>, tensor<?x2x5xf32>) outs(%{{.*}} : tensor<?x2x8xf32>)
// CHECK: %[[A:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.*}}, %{{.*}} : tensor<?x2x5xf32>, tensor<?x2x8xf32>) outs(%{{.*}} : tensor<?x2x5x8xf32>)
// CHECK: %[[AF:.*]] = tensor.collapse_shape %[[A]] {{\[}}[0], [1, 2, 3]] : tensor<?x2x5x8xf32> into tensor<?x80xf32>
// CHECK: %[[WO:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<10x8x16xf32> into tensor<80x16xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[AF]], %[[WO]] : tensor<?x80xf32>, tensor<80x16xf32>) outs(%{{.*}} : tensor<?x16xf32>)
// No gather of expert weights is left.
// CHECK-NOT: tensor.extract %{{.*}} : tensor<10x
// CHECK-NOT: moe.
func.func @projections(%x: tensor<?x16xf32>, %wv: tensor<10x16x8xf32>, %wo: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>) -> tensor<?x16xf32> {
  %p = moe.expert_proj %x, %wv, %g, %i : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x2x8xf32>
  %y = moe.expert_merge %p, %wo, %g, %i : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// The unfused gradients, dense too. With C = G · dout [N, H, E, F]:
// dx contracts C with the weight over (h, e, f), dW contracts the tokens
// with C over n, and the gate gradients read the dense dots of dout with
// the recomputed projections [N, H, E] at the routes' experts. The merge's
// dA = dy · Wᵀ [N, H·E·F] gives dheads (the G-weighted sum over experts)
// and the gate gradients; dW contracts A = G · heads with dy over n.
// CHECK-LABEL: func.func @projection_grads
// CHECK: %[[C:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.*}}, %{{.*}} : tensor<?x2x5xf32>, tensor<?x2x8xf32>) outs(%{{.*}} : tensor<?x2x5x8xf32>)
// CHECK: %[[W:.*]] = tensor.expand_shape %{{.*}} : tensor<10x16x8xf32> into tensor<2x5x16x8xf32>
// CHECK: %[[DX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%[[C]], %[[W]] : tensor<?x2x5x8xf32>, tensor<2x5x16x8xf32>) outs(%{{.*}} : tensor<?x16xf32>)
// CHECK: %[[DW:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %[[C]] : tensor<?x16xf32>, tensor<?x2x5x8xf32>) outs(%{{.*}} : tensor<2x5x16x8xf32>)
// CHECK: %[[DWV:.*]] = tensor.collapse_shape %[[DW]] {{\[}}[0, 1], [2], [3]] : tensor<2x5x16x8xf32> into tensor<10x16x8xf32>
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[W]] : tensor<?x16xf32>, tensor<2x5x16x8xf32>) outs(%{{.*}} : tensor<?x2x5x8xf32>)
// CHECK: %[[DOTS:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[P]] : tensor<?x2x8xf32>, tensor<?x2x5x8xf32>) outs(%{{.*}} : tensor<?x2x5xf32>)
// CHECK: %[[DG:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<?x2x3xi32>) outs(%{{.*}} : tensor<?x2x3xf32>)
// CHECK: tensor.extract %[[DOTS]]
// CHECK: %[[WO:.*]] = tensor.collapse_shape %{{.*}} : tensor<10x8x16xf32> into tensor<80x16xf32>
// CHECK: %[[DA:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[WO]] : tensor<?x16xf32>, tensor<80x16xf32>) outs(%{{.*}} : tensor<?x80xf32>)
// CHECK: %[[DA4:.*]] = tensor.expand_shape %[[DA]] {{.*}} : tensor<?x80xf32> into tensor<?x2x5x8xf32>
// CHECK: %[[A:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<?x2x5x8xf32>)
// CHECK: %[[AF:.*]] = tensor.collapse_shape %[[A]]
// CHECK: %[[DWO:.*]] = linalg.generic {{.*}} ins(%[[AF]], %{{.*}} : tensor<?x80xf32>, tensor<?x16xf32>) outs(%{{.*}} : tensor<80x16xf32>)
// CHECK: tensor.expand_shape %[[DWO]] {{.*}} : tensor<80x16xf32> into tensor<10x8x16xf32>
// CHECK: linalg.generic {{.*}} ins(%[[DA4]], %{{.*}} : tensor<?x2x5x8xf32>, tensor<?x2x5xf32>) outs(%{{.*}} : tensor<?x2x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[DA4]] : tensor<?x2x8xf32>, tensor<?x2x5x8xf32>) outs(%{{.*}} : tensor<?x2x5xf32>)
// CHECK: return %[[DX]], %[[DWV]], %[[DG]],
// CHECK-NOT: moe.
func.func @projection_grads(%x: tensor<?x16xf32>, %wv: tensor<10x16x8xf32>, %wo: tensor<10x8x16xf32>, %g: tensor<?x2x3xf32>, %i: tensor<?x2x3xi32>, %v: tensor<?x2x8xf32>, %dv: tensor<?x2x8xf32>, %dy: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>) {
  %dx, %dwv, %dgv = moe.expert_proj_grad %x, %wv, %g, %i, %dv : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x2x8xf32> -> tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>
  %do, %dwo, %dgo = moe.expert_merge_grad %v, %wo, %g, %i, %dy : tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>, tensor<?x2x3xi32>, tensor<?x16xf32> -> tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>
  return %dx, %dwv, %dgv, %do, %dwo, %dgo : tensor<?x16xf32>, tensor<10x16x8xf32>, tensor<?x2x3xf32>, tensor<?x2x8xf32>, tensor<10x8x16xf32>, tensor<?x2x3xf32>
}

// The expert MLP: up projection, ReLU, gated down projection.
// CHECK-LABEL: func.func @mlp
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK: tensor.extract %{{.*}} : tensor<8x16x4xf16>
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "reduction"]
// CHECK: tensor.extract %{{.*}} : tensor<8x4x16xf16>
// The f32 accumulator is truncated to the op's element type at the end.
// CHECK: arith.truncf {{.*}} : f32 to f16
// CHECK-NOT: moe.
func.func @mlp(%x: tensor<5x16xf16>, %up: tensor<8x16x4xf16>, %down: tensor<8x4x16xf16>, %g: tensor<5x2xf32>, %i: tensor<5x2xi32>) -> tensor<5x16xf16> {
  %y = moe.expert_mlp %x, %up, %down, %g, %i : tensor<5x16xf16>, tensor<8x16x4xf16>, tensor<8x4x16xf16>, tensor<5x2xf32>, tensor<5x2xi32> -> tensor<5x16xf16>
  return %y : tensor<5x16xf16>
}

// Attention: scores [B, H, T, S] with the keys in the unit-stride
// dimension, as contractions (q·kᵀ, and q·relᵀ over every distance, then
// skewed: read at t + shift - u), masked maxima, exponentials, sums,
// normalised weights, and the weighted values, a contraction too.
// CHECK-LABEL: func.func @attention
// CHECK: %[[QK:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>) outs(%{{.*}} : tensor<?x2x4x6xf32>)
// CHECK: %[[QR:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}} : tensor<?x4x2x8xf32>, tensor<6x2x8xf32>) outs(%{{.*}} : tensor<?x2x4x6xf32>)
// CHECK: %[[SKEW:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<?x2x4x6xf32>)
// CHECK: tensor.extract %[[QR]]
// CHECK: %[[SCORES:.*]] = linalg.generic {{.*}} ins(%[[QK]], %[[SKEW]] : tensor<?x2x4x6xf32>, tensor<?x2x4x6xf32>)
// CHECK: linalg.generic {{.*}}ins(%[[SCORES]] : tensor<?x2x4x6xf32>) outs(%{{.*}} : tensor<?x2x4xf32>)
// The row maximum passes over NaN (maxnumf: the masked row's reduction
// vectorizes; a NaN still reaches the row through its exponential).
// CHECK: arith.cmpi ule
// CHECK: arith.maxnumf
// CHECK: math.exp
// CHECK: linalg.generic
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x2x4x6xf32>, tensor<?x2x4xf32>) outs(%{{.*}} : tensor<?x2x4x6xf32>)
// CHECK: arith.divf
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[P]], %{{.*}} : tensor<?x2x4x6xf32>, tensor<?x6x2x8xf32>) outs(%{{.*}} : tensor<?x4x2x8xf32>)
// CHECK-NOT: moe.
func.func @attention(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %v: tensor<?x6x2x8xf32>, %r: tensor<6x2x8xf32>) -> tensor<?x4x2x8xf32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<6x2x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32> -> tensor<?x4x2x8xf32>
  return %o : tensor<?x4x2x8xf32>
}

// The building blocks lower too; the CPU pipeline compiles them (RUN 2).
// CHECK-LABEL: func.func @building_blocks
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.mulf {{.*}}, %{{.*}} : f32
// CHECK: arith.maximumf
// CHECK: math.rsqrt
// CHECK: math.cos
// CHECK: math.sin
// CHECK: scf.if
// CHECK: math.log
// CHECK-NOT: moe.
func.func @building_blocks(%x: tensor<?x16xf32>, %w: tensor<8x16xf32>,
                           %h: tensor<?x4x16xf32>, %m: tensor<?x6x16xf32>,
                           %g: tensor<16xf32>, %q: tensor<?x4x2x8xf32>,
                           %table: tensor<256x16xf32>, %t: tensor<?x4xi32>,
                           %l: tensor<?x4x256xf32>)
    -> (tensor<?x8xf32>, tensor<?x4x16xf32>, tensor<?x4x2x8xf32>,
        tensor<?x4x16xf32>, tensor<?x10x16xf32>, tensor<f32>) {
  %y = moe.linear %x, %w {scale = 0.5} : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %r = moe.relu %y : tensor<?x8xf32>
  %n = moe.layer_norm %h, %g, %g : tensor<?x4x16xf32>, tensor<16xf32>
  %p = moe.rope %q {offset = 2} : tensor<?x4x2x8xf32>
  %e = moe.embed %table, %t : tensor<256x16xf32>, tensor<?x4xi32> -> tensor<?x4x16xf32>
  %c = moe.concat %m, %h : tensor<?x6x16xf32>, tensor<?x4x16xf32> -> tensor<?x10x16xf32>
  %loss = moe.cross_entropy %l, %t : tensor<?x4x256xf32>, tensor<?x4xi32> -> tensor<f32>
  return %r, %n, %p, %e, %c, %loss : tensor<?x8xf32>, tensor<?x4x16xf32>, tensor<?x4x2x8xf32>, tensor<?x4x16xf32>, tensor<?x10x16xf32>, tensor<f32>
}

// Inference mode: an unseeded mask is all false and its dropout the
// identity; add_loss passes its input through and the entropy is dead code.
// CHECK-LABEL: func.func @inference_dropout
// CHECK-SAME: (%[[X:[^:]*]]: tensor<?x8xf32>
// CHECK-NOT: moe.
// CHECK: return %[[X]]
func.func @inference_dropout(%x: tensor<?x8xf32>, %z: tensor<?x4xf32>) -> tensor<?x8xf32> {
  %m = moe.dropout_mask %x {rate = 0.1 : f64} : tensor<?x8xf32> -> tensor<?x8xi1>
  %y = moe.dropout %x, %m {rate = 0.1 : f64} : tensor<?x8xf32>, tensor<?x8xi1>
  %h = moe.routing_entropy %z : tensor<?x4xf32> -> tensor<f32>
  %r = moe.add_loss %y, %h {weight = -1.0e-3 : f64} : tensor<?x8xf32>, tensor<f32>
  return %r : tensor<?x8xf32>
}

// Training mode: the mask hashes (seed + stream, element index) with
// SplitMix64 and compares the top 24 bits with floor(rate · 2^24); dropout
// selects 0 or x / (1 - rate).
// CHECK-LABEL: func.func @training_dropout
// CHECK: %[[SEED:.*]] = tensor.extract
// CHECK: arith.addi %[[SEED]], %{{.*}} : i64
// CHECK: linalg.generic
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[SCALED:.*]] = arith.muli %[[ROW]], %{{.*}} : index
// CHECK: %[[COL:.*]] = linalg.index 1 : index
// CHECK: arith.addi %[[SCALED]], %[[COL]] : index
// CHECK: arith.constant -4658895280553007687 : i64
// CHECK: arith.shrui %{{.*}}, %{{.*}} : i64
// CHECK: %[[THRESHOLD:.*]] = arith.constant 1677721 : i64
// CHECK: arith.cmpi ult, %{{.*}}, %[[THRESHOLD]] : i64
// CHECK: linalg.generic
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
func.func @training_dropout(%x: tensor<?x8xf32>, %s: tensor<i64>) -> tensor<?x8xf32> {
  %m = moe.dropout_mask %x seed(%s) {rate = 0.1 : f64, stream = 1 : i64} : tensor<?x8xf32>, tensor<i64> -> tensor<?x8xi1>
  %y = moe.dropout %x, %m {rate = 0.1 : f64} : tensor<?x8xf32>, tensor<?x8xi1>
  return %y : tensor<?x8xf32>
}

// The entropy of the token-averaged softmax: row statistics, the mean over
// tokens, then -sum p log p.
// CHECK-LABEL: func.func @routing_entropy
// CHECK-COUNT-4: linalg.generic
// CHECK: math.log
// CHECK-NOT: moe.
func.func @routing_entropy(%z: tensor<?x4xf32>) -> tensor<f32> {
  %h = moe.routing_entropy %z : tensor<?x4xf32> -> tensor<f32>
  return %h : tensor<f32>
}

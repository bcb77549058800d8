// RUN: switchyard-opt %s --moe-fuse-attention | FileCheck %s

// The forward op becomes moe.flash_attention; its logsumexp is unused.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[Q:.*]]: tensor<?x4x2x8xf32>, %[[K:.*]]: tensor<?x4x2x8xf32>, %[[V:.*]]: tensor<?x4x2x8xf32>)
// CHECK: %[[O:.*]], %{{.*}} = moe.flash_attention %[[Q]], %[[K]], %[[V]] : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x4x2xf32>
// CHECK-NOT: moe.attention
// CHECK: return %[[O]]
func.func @forward(%q: tensor<?x4x2x8xf32>, %k: tensor<?x4x2x8xf32>, %v: tensor<?x4x2x8xf32>) -> tensor<?x4x2x8xf32> {
  %o = moe.attention %q, %k, %v : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>
  return %o : tensor<?x4x2x8xf32>
}

// As in a `_grad` function after lm-differentiate: the gradient reads the
// output and logsumexp of the forward op of the same operands (XL memory,
// relative keys); nothing is recomputed.
// CHECK-LABEL: func.func @forward_and_gradient
// CHECK-SAME: (%[[Q:.*]]: tensor<?x4x2x8xf32>, %[[K:.*]]: tensor<?x6x2x8xf32>, %[[V:.*]]: tensor<?x6x2x8xf32>, %[[R:.*]]: tensor<6x2x8xf32>, %[[DO:.*]]: tensor<?x4x2x8xf32>)
// CHECK: %[[O:.*]], %[[LSE:.*]] = moe.flash_attention %[[Q]], %[[K]], %[[V]] rel(%[[R]] : tensor<6x2x8xf32>)
// CHECK-NOT: moe.flash_attention %
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]], %[[DR:.*]] = moe.flash_attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] rel(%[[R]] : tensor<6x2x8xf32>) : {{.*}} -> tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<6x2x8xf32>
// CHECK-NOT: moe.attention
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[DV]], %[[DR]]
func.func @forward_and_gradient(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %v: tensor<?x6x2x8xf32>, %r: tensor<6x2x8xf32>, %do: tensor<?x4x2x8xf32>) -> (tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<6x2x8xf32>) {
  %o = moe.attention %q, %k, %v rel(%r : tensor<6x2x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32> -> tensor<?x4x2x8xf32>
  %dq, %dk, %dv, %dr = moe.attention_grad %q, %k, %v, %do rel(%r : tensor<6x2x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<6x2x8xf32>
  return %o, %dq, %dk, %dv, %dr : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<6x2x8xf32>
}

// A gradient without its forward op (or of other operands) recomputes the
// output and logsumexp just before it.
// CHECK-LABEL: func.func @gradient_alone
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x2x8xf32>, %[[K:.*]]: tensor<2x4x2x8xf32>, %[[V:.*]]: tensor<2x4x2x8xf32>, %[[DO:.*]]: tensor<2x4x2x8xf32>)
// CHECK: %[[O1:.*]], %{{.*}} = moe.flash_attention %[[Q]], %[[Q]], %[[V]]
// CHECK: %[[O:.*]], %[[LSE:.*]] = moe.flash_attention %[[Q]], %[[K]], %[[V]] : tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32> -> tensor<2x4x2x8xf32>, tensor<2x4x2xf32>
// CHECK-NEXT: moe.flash_attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] :
func.func @gradient_alone(%q: tensor<2x4x2x8xf32>, %k: tensor<2x4x2x8xf32>, %v: tensor<2x4x2x8xf32>, %do: tensor<2x4x2x8xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) {
  %other = moe.attention %q, %q, %v : tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32> -> tensor<2x4x2x8xf32>
  %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32> -> tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>
  return %other, %dq : tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>
}

// A dynamic head width cannot be a vector row: left unfused.
// CHECK-LABEL: func.func @dynamic_width
// CHECK: moe.attention %
// CHECK: moe.attention_grad %
// CHECK-NOT: moe.flash
func.func @dynamic_width(%q: tensor<?x4x2x?xf32>, %do: tensor<?x4x2x?xf32>) -> (tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>) {
  %o = moe.attention %q, %q, %q : tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32> -> tensor<?x4x2x?xf32>
  %dq, %dk, %dv = moe.attention_grad %q, %q, %q, %do : tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32> -> tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>
  return %o, %dq : tensor<?x4x2x?xf32>, tensor<?x4x2x?xf32>
}

// A decoding step's attention (queries at a position of a key/value cache)
// keeps the unfused lowering.
// CHECK-LABEL: func.func @decoding_step
// CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}} at %{{.*}}
// CHECK-NOT: moe.flash_attention
func.func @decoding_step(%q: tensor<1x1x2x8xf32>, %k: tensor<1x16x2x8xf32>, %v: tensor<1x16x2x8xf32>, %p: index) -> tensor<1x1x2x8xf32> {
  %o = moe.attention %q, %k, %v at %p : tensor<1x1x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32> -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}

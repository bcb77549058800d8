// RUN: switchyard-opt %s --moe-fuse-attention --convert-moe-to-linalg | FileCheck %s
// RUN: switchyard-opt %s --convert-moe-to-linalg | FileCheck %s --check-prefix=UNFUSED
// RUN: switchyard-opt %s --moe-fuse-attention --convert-moe-to-linalg --switchyard-cpu-pipeline -o /dev/null
// RUN: switchyard-opt %s --moe-fuse-attention --convert-moe-to-linalg=flash-attention-kernel=true | FileCheck %s --check-prefix=KERNEL
// RUN: switchyard-opt %s --moe-fuse-attention --convert-moe-to-linalg=flash-attention-rounding=bf16 | FileCheck %s --check-prefix=ROUND
// RUN: not switchyard-opt %s --convert-moe-to-linalg=flash-attention-rounding=f8 2>&1 | FileCheck %s --check-prefix=BAD

// The flash-attention ops become row kernels: scf.forall over rows whose
// bodies loop over keys (or queries) on vector<8xf32> rows and write their
// own row through tensor.parallel_insert_slice. With T = 4 queries and
// S = 6 keys, no tensor may have both a 4 and a 6 dimension (the [B, T, S,
// H] weights); the unfused lowering, checked with UNFUSED, builds exactly
// such tensors, so the CHECK-NOT patterns can fire. The numerics are
// compared with the unfused lowering in test/unit/FuseAttentionTest.cpp.

// Forward: one kernel over (b, t, a) with an online softmax over the keys
// u <= t + 2, writing the output row and the row logsumexp.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: {{tensor<[^>]*(4x6|6x4)[^>]*>}}
// CHECK: scf.forall ({{.*}}) in ({{.*}}) shared_outs({{.*}}) -> (tensor<?x4x2x8xf32>, tensor<?x4x2xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<?x4x2x8xf32>, vector<8xf32>
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, vector<8xf32>)
// CHECK: vector.transfer_read {{.*}} : tensor<?x6x2x8xf32>, vector<8xf32>
// CHECK: vector.transfer_read {{.*}} : tensor<6x2x8xf32>, vector<8xf32>
// CHECK: vector.reduction <add>
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: vector.fma
// CHECK: math.log
// CHECK: scf.forall.in_parallel
// CHECK: tensor.parallel_insert_slice {{.*}} : tensor<1x1x1x8xf32> into tensor<?x4x2x8xf32>
// CHECK: tensor.parallel_insert_slice {{.*}} : tensor<1x1x1xf32> into tensor<?x4x2xf32>
// CHECK-NOT: {{tensor<[^>]*(4x6|6x4)[^>]*>}}
// CHECK-NOT: linalg.
// CHECK: return
// UNFUSED-LABEL: func.func @forward
// UNFUSED: tensor<?x2x4x6xf32>
func.func @forward(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %v: tensor<?x6x2x8xf32>, %r: tensor<6x2x8xf32>) -> tensor<?x4x2x8xf32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<6x2x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32> -> tensor<?x4x2x8xf32>
  return %o : tensor<?x4x2x8xf32>
}

// Backward: the forward kernel, then one kernel over the query rows (dq
// and Δ), one over the key rows (dk and dv, over the queries t >= u - 2)
// and one over the relative-key rows (δ, a), looping over b and t.
// CHECK-LABEL: func.func @gradient
// CHECK-NOT: {{tensor<[^>]*(4x6|6x4)[^>]*>}}
// CHECK: scf.forall {{.*}} -> (tensor<?x4x2x8xf32>, tensor<?x4x2xf32>)
// CHECK: scf.forall {{.*}} -> (tensor<?x4x2x8xf32>, tensor<?x4x2xf32>)
// CHECK: scf.for {{.*}} -> (vector<8xf32>)
// CHECK: math.exp
// CHECK: vector.fma
// CHECK: scf.forall {{.*}} -> (tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>)
// CHECK: arith.maxsi
// CHECK: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>)
// CHECK: tensor.extract {{.*}} : tensor<?x4x2xf32>
// CHECK: scf.forall {{.*}} -> (tensor<6x2x8xbf16>)
// CHECK: scf.for {{.*}} -> (vector<8xf32>)
// CHECK: scf.for {{.*}} -> (vector<8xf32>)
// CHECK: arith.truncf {{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: tensor.parallel_insert_slice {{.*}} : tensor<1x1x8xbf16> into tensor<6x2x8xbf16>
// CHECK-NOT: {{tensor<[^>]*(4x6|6x4)[^>]*>}}
// CHECK-NOT: linalg.
// CHECK: return
// UNFUSED-LABEL: func.func @gradient
// UNFUSED: tensor<?x2x4x6xf32>
func.func @gradient(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %v: tensor<?x6x2x8xf32>, %r: tensor<6x2x8xbf16>, %do: tensor<?x4x2x8xf32>) -> (tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<6x2x8xbf16>) {
  %qb = arith.truncf %q : tensor<?x4x2x8xf32> to tensor<?x4x2x8xbf16>
  %kb = arith.truncf %k : tensor<?x6x2x8xf32> to tensor<?x6x2x8xbf16>
  %vb = arith.truncf %v : tensor<?x6x2x8xf32> to tensor<?x6x2x8xbf16>
  %dob = arith.truncf %do : tensor<?x4x2x8xf32> to tensor<?x4x2x8xbf16>
  %o = moe.attention %q, %k, %v : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32> -> tensor<?x4x2x8xf32>
  %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>
  %bq, %bk, %bv, %br = moe.attention_grad %qb, %kb, %vb, %dob rel(%r : tensor<6x2x8xbf16>) : tensor<?x4x2x8xbf16>, tensor<?x6x2x8xbf16>, tensor<?x6x2x8xbf16>, tensor<?x4x2x8xbf16> -> tensor<?x4x2x8xbf16>, tensor<?x6x2x8xbf16>, tensor<?x6x2x8xbf16>, tensor<6x2x8xbf16>
  return %o, %dq, %dk, %dv, %br : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<6x2x8xbf16>
}

// flash-attention-kernel (the GPU pipelines with tensor cores): the forward
// attention becomes moe.flash_attention_kernel on empty inits, kept for
// switchyard-gpu-tensor-core-matmul, and its gradient
// moe.flash_attention_grad_kernel on Δ = Σ_f dO·O (a linalg reduction with
// math.fma: no contraction for the tensor-core pass to round) and the
// forward kernel's logsumexp; with relative keys (@forward, the second
// gradient of @gradient) both take rel, and the gradient of rel
// accumulates into zeros in f32, rounded to bf16 afterwards. No row kernel
// is left.
// KERNEL-LABEL: func.func @forward(
// KERNEL-SAME: %[[Q:[^:]*]]: tensor<?x4x2x8xf32>, %[[K:[^:]*]]: tensor<?x6x2x8xf32>, %[[V:[^:]*]]: tensor<?x6x2x8xf32>, %[[R:[^:]*]]: tensor<6x2x8xf32>)
// KERNEL: moe.flash_attention_kernel ins(%[[Q]], %[[K]], %[[V]] : {{.*}}) rel(%[[R]] : tensor<6x2x8xf32>) outs(
// KERNEL-NOT: scf.forall
// KERNEL-LABEL: func.func @gradient(
// KERNEL-SAME: %[[Q:[^:]*]]: tensor<?x4x2x8xf32>, %[[K:[^:]*]]: tensor<?x6x2x8xf32>, %[[V:[^:]*]]: tensor<?x6x2x8xf32>, %[[R:[^:]*]]: tensor<6x2x8xbf16>, %[[DO:[^:]*]]: tensor<?x4x2x8xf32>)
// KERNEL: %[[F:.*]]:2 = moe.flash_attention_kernel ins(%[[Q]], %[[K]], %[[V]] :
// KERNEL: %[[Z:.*]] = linalg.fill
// KERNEL: %[[D:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[DO]], %[[F]]#0 : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>) outs(%[[Z]] : tensor<?x4x2xf32>)
// KERNEL: math.fma
// KERNEL: %[[G:.*]]:3 = moe.flash_attention_grad_kernel ins(%[[Q]], %[[K]], %[[V]], %[[F]]#1, %[[D]], %[[DO]] : {{.*}}) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>) ->
// KERNEL: %[[FR:.*]]:2 = moe.flash_attention_kernel ins({{.*}}) rel(%[[R]] : tensor<6x2x8xbf16>)
// KERNEL: %[[ZR:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<6x2x8xf32>)
// KERNEL: %[[GR:.*]]:4 = moe.flash_attention_grad_kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[FR]]#1, {{.*}}) rel(%[[R]] : tensor<6x2x8xbf16>) outs({{.*}}) rel_grad(%[[ZR]] : tensor<6x2x8xf32>)
// KERNEL: %[[DR:.*]] = linalg.generic {{.*}} ins(%[[GR]]#3 : tensor<6x2x8xf32>) outs(%{{.*}} : tensor<6x2x8xbf16>)
// KERNEL: arith.truncf %{{.*}} : f32 to bf16
// KERNEL-NOT: scf.forall
// KERNEL: return %[[F]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2, %[[DR]] :
// KERNEL-LABEL: func.func @forward_rope(
// KERNEL-SAME: %[[Q:[^:]*]]: tensor<?x4x2x8xf32>, %[[K:[^:]*]]: tensor<?x6x2x8xf32>, %[[V:[^:]*]]: tensor<?x6x2x8xf32>)
// KERNEL: %[[OI:.*]] = tensor.empty(%{{.*}}) : tensor<?x4x2x8xf32>
// KERNEL: %[[LI:.*]] = tensor.empty(%{{.*}}) : tensor<?x4x2xf32>
// KERNEL: %[[R:.*]]:2 = moe.flash_attention_kernel ins(%[[Q]], %[[K]], %[[V]] : {{.*}}) outs(%[[OI]], %[[LI]] : tensor<?x4x2x8xf32>, tensor<?x4x2xf32>) -> tensor<?x4x2x8xf32>, tensor<?x4x2xf32>
// KERNEL-NOT: scf.forall
// KERNEL: return %[[R]]#0
// flash-attention-rounding=bf16 (the CPU reference of the GPU's bf16
// tensor-core route): the row kernels round Q, K, V and the relative keys
// as read (truncf to bf16 and back), and in the backward pass dO and the
// weights P and dS as factors; not the forward pass's weights.
// ROUND-LABEL: func.func @forward(
// ROUND-COUNT-4: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// ROUND-NOT: to vector<8xbf16>
// ROUND-LABEL: func.func @gradient(
// ROUND: arith.truncf %{{.*}} : f32 to bf16
// ROUND-LABEL: func.func @forward_rope(
// ROUND-COUNT-3: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// ROUND-NOT: to bf16
// ROUND: return
// BAD: convert-moe-to-linalg: flash-attention-rounding must be f32, bf16 or f16, found 'f8'
func.func @forward_rope(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %v: tensor<?x6x2x8xf32>) -> tensor<?x4x2x8xf32> {
  %o = moe.attention %q, %k, %v : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32> -> tensor<?x4x2x8xf32>
  return %o : tensor<?x4x2x8xf32>
}

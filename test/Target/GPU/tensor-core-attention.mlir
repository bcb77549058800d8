// REQUIRES: ptxas
// UNSUPPORTED: verify-roundtrip
// (Its output is the GPU pipeline's: upstream's LLVM and GPU dialects, PTX
// in a gpu.binary. The round trip of such output is checked once, by
// switchhead-tiny-train-step.test; here it would repeat this test's
// compilation for nothing of Switchyard's own.)
// element-type=bf16 on sm_80+: the forward attention (moe.attention, fused
// into moe.flash_attention and kept as moe.flash_attention_kernel) is one
// tensor-core kernel: ldmatrix for the queries and for K and Vᵀ,
// 64 mma.sync per step of 64 keys at head width 64 (QKᵀ: 8 tiles x 4 of the
// width; PV: 8 tiles x 4 of the keys), butterfly shuffles for the row
// maxima and sums over the lanes of a quad (2 + 2 in the loop, 4 after it),
// and no local memory: ptxas for sm_80 allocates 128 registers and spills
// nothing (252 at head width 128, measured by hand, no spills). Assembled
// for sm_80, sm_90a and sm_120. Numerics: test/Integration/CUDA/attention.test.

// RUN: rm -rf %t && mkdir -p %t
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa element-type=bf16" -o %t/sm_80.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/sm_80.mlir %t
// RUN: FileCheck %s --input-file=%t/attention_kernels.ptx
// RUN: %ptxas -arch=sm_80 -v %t/attention_kernels.ptx -o %t/sm_80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=GRAD --input-file=%t/attention_grad_kernels.ptx
// RUN: FileCheck %s --check-prefix=GRAD-TRANS --input-file=%t/attention_grad_kernels.ptx
// RUN: %ptxas -arch=sm_80 -v %t/attention_grad_kernels.ptx -o %t/sm_80_grad.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS-GRAD
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_90a format=isa element-type=bf16" -o %t/sm_90a.mlir
// RUN: mkdir %t/sm_90a %t/sm_120 && %python %S/Inputs/extract_ptx.py %t/sm_90a.mlir %t/sm_90a
// RUN: %ptxas -arch=sm_90a %t/sm_90a/attention_kernels.ptx -o %t/sm_90a.cubin
// RUN: %ptxas -arch=sm_90a %t/sm_90a/attention_grad_kernels.ptx -o %t/sm_90a_grad.cubin
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_120 format=isa element-type=bf16" -o %t/sm_120.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/sm_120.mlir %t/sm_120
// RUN: %ptxas -arch=sm_120 %t/sm_120/attention_kernels.ptx -o %t/sm_120.cubin
// RUN: %ptxas -arch=sm_120 %t/sm_120/attention_grad_kernels.ptx -o %t/sm_120_grad.cubin

// CHECK: .visible .entry attention_kernel_{{[0-9]+}}(
// CHECK-NOT: .local
// CHECK-COUNT-64: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK-NOT: mma.sync
// CHECK-COUNT-4: shfl.sync.bfly.b32
// CHECK-NOT: shfl.sync
// CHECK: ret;
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: spill

// The backward pass (moe.attention_grad, fused with its forward pass, both
// kept as kernels): the forward kernel (@attention's, which
// switchyard-gpu-share-kernels launches for both), then Δ = Σ_f dO·O (a
// SIMT reduction, whose threads also store its initial zero), the dK and
// dV kernel (per step of 64 queries at head width 64: Sᵀ = K·Qᵀ and
// dPᵀ = V·dOᵀ, 32 mma.sync each; dV += Pᵀ·dO and dK += dSᵀ·Q, 32 each with
// their B fragments by ldmatrix .trans) and the dQ kernel (S, dP and
// dQ += dS·K: 96 mma.sync, 32 ldmatrix .trans). No local memory, no
// spills: ptxas for sm_80 allocates 176 and 167 registers to the two
// (measured by hand; 219 and 128 at head width 128, no spills).
// GRAD: .visible .entry attention_grad_kernel_{{[0-9]+}}(
// GRAD-NOT: mma.sync
// GRAD: .visible .entry attention_grad_kernel_{{[0-9]+}}(
// GRAD-NOT: .local
// GRAD-COUNT-128: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// GRAD-NOT: .local
// GRAD: ret;
// GRAD: .visible .entry attention_grad_kernel_{{[0-9]+}}(
// GRAD-NOT: .local
// GRAD-COUNT-96: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// GRAD-NOT: mma.sync
// GRAD-NOT: .local
// GRAD: ret;
// GRAD-TRANS: .visible .entry attention_grad_kernel_{{[0-9]+}}(
// GRAD-TRANS: .visible .entry attention_grad_kernel_{{[0-9]+}}(
// GRAD-TRANS-COUNT-64: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// GRAD-TRANS: .visible .entry attention_grad_kernel_{{[0-9]+}}(
// GRAD-TRANS-COUNT-32: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// GRAD-TRANS-NOT: ldmatrix.sync.aligned.m8n8.x2.trans
// PTXAS-GRAD-COUNT-3: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-GRAD-NOT: spill

func.func @attention(%q: tensor<?x256x8x64xf32>, %k: tensor<?x256x8x64xf32>, %v: tensor<?x256x8x64xf32>) -> tensor<?x256x8x64xf32> {
  %o = moe.attention %q, %k, %v : tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32> -> tensor<?x256x8x64xf32>
  return %o : tensor<?x256x8x64xf32>
}

func.func @attention_grad(%q: tensor<?x256x8x64xf32>, %k: tensor<?x256x8x64xf32>, %v: tensor<?x256x8x64xf32>, %do: tensor<?x256x8x64xf32>) -> (tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>) {
  %dq, %dk, %dv = moe.attention_grad %q, %k, %v, %do : tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32> -> tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>
  return %dq, %dk, %dv : tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>
}

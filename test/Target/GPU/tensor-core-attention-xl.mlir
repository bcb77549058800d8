// REQUIRES: ptxas
// UNSUPPORTED: verify-roundtrip
// (Its output is the GPU pipeline's: upstream's LLVM and GPU dialects, PTX
// in a gpu.binary. The round trip of such output is checked once, by
// switchhead-tiny-train-step.test; here it would repeat this test's
// compilation for nothing of Switchyard's own.)
// element-type=bf16 on sm_80+, attention with relative keys (Transformer-XL,
// as the paper's 47M configurations: 256 queries, 256 more keys of memory,
// relative keys over 512 distances; head width 64 here): the forward kernel
// per step of 64 keys, 104 mma.sync (QKᵀ 32, the warp's 16 rows by its 80
// distances 40, PV 32); the backward's dK/dV kernel 208 (Sᵀ 32, dPᵀ 32,
// the relative scores 40, dV 32, dK 32, drel 40: each warp its 16 queries
// by their 80 distances) with 160 f32 atomic adds (drel, one per
// accumulator value) and the dQ kernel 176 (S 32, dP 32, the
// relative scores 40, dQ 32, dS·rel 40). No guard on the skew scratch's
// stores and loads (it has margins for the keys a warp's distances reach
// outside the step), so no per-element predicate stays live across the
// loop. ptxas for sm_80 (measured by hand): the forward kernel 128
// registers, 8 bytes of spill stores; dQ 255 and 20 bytes; dK/dV/drel 255
// and 140 bytes; at head width 128: 255 registers, 0, 12 and 1136 bytes;
// at width 76 (the 47M configurations'): 84, 240 and 516 bytes (without
// relative keys 32, 92 and 56). Register pressure is open work; checked
// here only as far as that no .local array is in the PTX.
// Assembled for sm_80, sm_90a and sm_120. Numerics:
// test/Integration/CUDA/attention-xl.test.

// RUN: rm -rf %t && mkdir -p %t/sm_90a %t/sm_120
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa element-type=bf16" -o %t/sm_80.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/sm_80.mlir %t
// RUN: FileCheck %s --input-file=%t/attention_xl_kernels.ptx
// RUN: FileCheck %s --check-prefix=GRAD --input-file=%t/attention_xl_grad_kernels.ptx
// RUN: %ptxas -arch=sm_80 %t/attention_xl_kernels.ptx -o %t/sm_80.cubin
// RUN: %ptxas -arch=sm_80 %t/attention_xl_grad_kernels.ptx -o %t/sm_80_grad.cubin
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_90a format=isa element-type=bf16" -o %t/sm_90a.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/sm_90a.mlir %t/sm_90a
// RUN: %ptxas -arch=sm_90a %t/sm_90a/attention_xl_kernels.ptx -o %t/sm_90a.cubin
// RUN: %ptxas -arch=sm_90a %t/sm_90a/attention_xl_grad_kernels.ptx -o %t/sm_90a_grad.cubin
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_120 format=isa element-type=bf16" -o %t/sm_120.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/sm_120.mlir %t/sm_120
// RUN: %ptxas -arch=sm_120 %t/sm_120/attention_xl_kernels.ptx -o %t/sm_120.cubin
// RUN: %ptxas -arch=sm_120 %t/sm_120/attention_xl_grad_kernels.ptx -o %t/sm_120_grad.cubin

// CHECK: .visible .entry attention_xl_kernel_{{[0-9]+}}(
// CHECK-NOT: .local
// CHECK-COUNT-104: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK-NOT: mma.sync
// CHECK: ret;

// The backward: the fill of drel (accumulated by the next kernel) and Δ
// (the reduction's threads store its initial zero), independent SIMT
// kernels launched as one (switchyard-gpu-merge-launches), then the
// dK/dV/drel kernel and the dQ kernel.
// GRAD: .visible .entry attention_xl_grad_kernel_{{[0-9]+}}(
// GRAD-NOT: mma.sync
// GRAD: .visible .entry attention_xl_grad_kernel_{{[0-9]+}}(
// GRAD-NOT: .local
// GRAD-COUNT-208: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// GRAD-NOT: mma.sync
// GRAD: .visible .entry attention_xl_grad_kernel_{{[0-9]+}}(
// GRAD-NOT: atom.global.add.f32
// GRAD-COUNT-176: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// GRAD-NOT: mma.sync
// GRAD-NOT: atom.global
// GRAD: ret;

func.func @attention_xl(%q: tensor<?x256x2x64xf32>, %k: tensor<?x512x2x64xf32>, %v: tensor<?x512x2x64xf32>, %r: tensor<512x2x64xf32>) -> tensor<?x256x2x64xf32> {
  %o = moe.attention %q, %k, %v rel(%r : tensor<512x2x64xf32>) : tensor<?x256x2x64xf32>, tensor<?x512x2x64xf32>, tensor<?x512x2x64xf32> -> tensor<?x256x2x64xf32>
  return %o : tensor<?x256x2x64xf32>
}

func.func @attention_xl_grad(%q: tensor<?x256x2x64xf32>, %k: tensor<?x512x2x64xf32>, %v: tensor<?x512x2x64xf32>, %do: tensor<?x256x2x64xf32>, %r: tensor<512x2x64xf32>) -> (tensor<?x256x2x64xf32>, tensor<?x512x2x64xf32>, tensor<?x512x2x64xf32>, tensor<512x2x64xf32>) {
  %dq, %dk, %dv, %dr = moe.attention_grad %q, %k, %v, %do rel(%r : tensor<512x2x64xf32>) : tensor<?x256x2x64xf32>, tensor<?x512x2x64xf32>, tensor<?x512x2x64xf32>, tensor<?x256x2x64xf32> -> tensor<?x256x2x64xf32>, tensor<?x512x2x64xf32>, tensor<?x512x2x64xf32>, tensor<512x2x64xf32>
  return %dq, %dk, %dv, %dr : tensor<?x256x2x64xf32>, tensor<?x512x2x64xf32>, tensor<?x512x2x64xf32>, tensor<512x2x64xf32>
}

// REQUIRES: ptxas
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
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_90a format=isa element-type=bf16" -o %t/sm_90a.mlir
// RUN: mkdir %t/sm_90a %t/sm_120 && %python %S/Inputs/extract_ptx.py %t/sm_90a.mlir %t/sm_90a
// RUN: %ptxas -arch=sm_90a %t/sm_90a/attention_kernels.ptx -o %t/sm_90a.cubin
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_120 format=isa element-type=bf16" -o %t/sm_120.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/sm_120.mlir %t/sm_120
// RUN: %ptxas -arch=sm_120 %t/sm_120/attention_kernels.ptx -o %t/sm_120.cubin

// CHECK: .visible .entry attention_kernel_{{[0-9]+}}(
// CHECK-NOT: .local
// CHECK-COUNT-64: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK-NOT: mma.sync
// CHECK-COUNT-4: shfl.sync.bfly.b32
// CHECK-NOT: shfl.sync
// CHECK: ret;
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: spill

func.func @attention(%q: tensor<?x256x8x64xf32>, %k: tensor<?x256x8x64xf32>, %v: tensor<?x256x8x64xf32>) -> tensor<?x256x8x64xf32> {
  %o = moe.attention %q, %k, %v : tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32>, tensor<?x256x8x64xf32> -> tensor<?x256x8x64xf32>
  return %o : tensor<?x256x8x64xf32>
}

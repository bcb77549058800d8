// REQUIRES: ptxas
// element-type=bf16 / f16 on sm_80: moe.linear (x·wᵀ, dynamic token count)
// runs on tensor cores. The PTX has ldmatrix (x4 for A, x2 for B) from
// 16-byte aligned shared memory and mma.sync m16n8k16 with f32 accumulators,
// and ptxas assembles it. element-type=f32 (the default) keeps the exact
// SIMT kernels: no tensor-core instruction at all. Nothing here runs on a
// GPU; numerics are for test/Integration/CUDA.

// RUN: rm -rf %t && mkdir -p %t
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa element-type=bf16" -o %t/bf16.mlir
// RUN: FileCheck %s --check-prefix=HOST --input-file=%t/bf16.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/bf16.mlir %t && mv %t/linear_kernels.ptx %t/bf16.ptx
// RUN: FileCheck %s --check-prefix=BF16 --input-file=%t/bf16.ptx
// RUN: %ptxas -arch=sm_80 %t/bf16.ptx -o %t/bf16.cubin

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa element-type=f16" -o %t/f16.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/f16.mlir %t && mv %t/linear_kernels.ptx %t/f16.ptx
// RUN: FileCheck %s --check-prefix=F16 --input-file=%t/f16.ptx
// RUN: %ptxas -arch=sm_80 %t/f16.ptx -o %t/f16.cubin

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa" -o %t/f32.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/f32.mlir %t && mv %t/linear_kernels.ptx %t/f32.ptx
// RUN: FileCheck %s --check-prefix=F32 --input-file=%t/f32.ptx
// RUN: %ptxas -arch=sm_80 %t/f32.ptx -o %t/f32.cubin

// The host launches the tensor-core kernel alone: its accumulators start
// from zero in place of the zero fill of the output (no kernel of its own);
// four warps per block and 10240 bytes of dynamic shared memory (two
// 64 x 40 bf16 tiles).
// HOST-LABEL: llvm.func @linear(
// HOST: %[[SMEM:.*]] = llvm.mlir.constant(10240 : i32) : i32
// HOST: gpu.launch_func {{.*}} @linear_kernels::@linear_kernel_0 blocks in ({{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) : i64 dynamic_shared_memory_size %[[SMEM]]
// HOST-NOT: gpu.launch_func

// The order of the instructions in the K loop is LLVM's (it rotates the
// loop), hence DAG checks; the counts are checked separately. K is 16: the
// one K step of 32 is straight-line code, two 16-wide halves (the second
// zero-filled) of 2 ldmatrix.x4, 4 ldmatrix.x2 and 8 mma.sync per warp. The
// staged bf16 go to shared memory four at a time, and no index is divided
// at run time (gpu-launch-sink-index-computations gives the kernels their
// constants).
// BF16: .version 8.1
// BF16: .target sm_80
// BF16: .visible .entry linear_kernel_0(
// BF16-DAG: .shared .align 16 .b8 __dynamic_shmem__
// BF16-DAG: cvt.rn.bf16.f32
// BF16-DAG: bar.sync 0;
// BF16-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// BF16-DAG: ldmatrix.sync.aligned.m8n8.x2.shared.b16
// BF16-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// BF16-DAG: st.shared.v4.b16
// RUN: FileCheck %s --check-prefix=NODIV --input-file=%t/bf16.ptx
// NODIV-NOT: {{(div|rem)}}.u
// RUN: FileCheck %s --check-prefix=BF16N --input-file=%t/bf16.ptx
// BF16N-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// BF16N-NOT: mma.sync
// RUN: FileCheck %s --check-prefix=BF16L --input-file=%t/bf16.ptx
// BF16L-COUNT-4: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// BF16L-NOT: ldmatrix.sync.aligned.m8n8.x4

// F16: .visible .entry linear_kernel_0(
// F16-DAG: cvt.rn.f16.f32
// F16-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// F16-DAG: ldmatrix.sync.aligned.m8n8.x2.shared.b16
// F16-DAG: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// RUN: FileCheck %s --check-prefix=F16N --input-file=%t/f16.ptx
// F16N-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// F16N-NOT: mma.sync

// f32: one SIMT kernel, whose threads store the fill's zero before their
// reduction (switchyard-linalg-to-loops fold-fills).
// F32: .visible .entry linear_kernel_0(
// F32-NOT: .entry
// F32-NOT: mma.sync
// F32-NOT: ldmatrix
// F32-NOT: bf16
// F32-NOT: .shared
func.func @linear(%x: tensor<?x16xf32>, %w: tensor<40x16xf32>) -> tensor<?x40xf32> {
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<40x16xf32> -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}

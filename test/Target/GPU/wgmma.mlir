// REQUIRES: ptxas
// chip=sm_90a element-type=f16|bf16 wgmma=true: moe.linear (x·wᵀ, dynamic
// token count, N = 128, K = 128) runs as two warpgroups per 128 x 128 tile
// with TMA loads (cp.async.bulk.tensor, 128-byte swizzle) into a ring of
// stages (here two: K is two steps of 64), one mbarrier per stage, and
// wgmma.mma_async m64n128k16 with f32 accumulators; ptxas assembles the PTX
// for sm_90a without spilling. The host makes the TMA descriptors with
// mgpuTensorMapEncodeTiledMemref. Fallbacks: plain sm_90 (no wgmma) and
// wgmma=false keep mma.sync. Nothing here runs on a GPU: the kernels'
// numerics are checked in the GPU emulation (Integration/CUDA/wgmma.test),
// the descriptors' encoding at run time only on a GPU.

// RUN: rm -rf %t && mkdir -p %t
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_90a format=isa element-type=f16 wgmma=true" -o %t/f16.mlir
// RUN: FileCheck %s --check-prefix=HOST --input-file=%t/f16.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/f16.mlir %t && mv %t/linear_kernels.ptx %t/f16.ptx
// RUN: FileCheck %s --check-prefixes=WGMMA,F16 --input-file=%t/f16.ptx
// RUN: %ptxas -arch=sm_90a -v %t/f16.ptx -o %t/f16.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_90a format=isa element-type=bf16 wgmma=true" -o %t/bf16.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/bf16.mlir %t && mv %t/linear_kernels.ptx %t/bf16.ptx
// RUN: FileCheck %s --check-prefixes=WGMMA,BF16 --input-file=%t/bf16.ptx
// RUN: %ptxas -arch=sm_90a %t/bf16.ptx -o %t/bf16.cubin

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_90 format=isa element-type=bf16 wgmma=true" -o %t/sm_90.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/sm_90.mlir %t && mv %t/linear_kernels.ptx %t/sm_90.ptx
// RUN: FileCheck %s --check-prefix=MMA --input-file=%t/sm_90.ptx
// RUN: %ptxas -arch=sm_90 %t/sm_90.ptx -o %t/sm_90.cubin

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_90a format=isa element-type=bf16" -o %t/off.mlir
// RUN: %python %S/Inputs/extract_ptx.py %t/off.mlir %t && mv %t/linear_kernels.ptx %t/off.ptx
// RUN: FileCheck %s --check-prefix=MMA --input-file=%t/off.ptx

// The host converts the factors (two SIMT kernels), makes one TMA
// descriptor per operand and launches 256 threads with two stages of
// 32 KiB of dynamic shared memory.
// HOST-LABEL: llvm.func @linear(
// HOST: %[[SMEM:.*]] = llvm.mlir.constant(66688 : i32) : i32
// HOST-COUNT-2: llvm.call @mgpuTensorMapEncodeTiledMemref(
// HOST: gpu.launch_func {{.*}} @linear_kernels::@linear_kernel_{{[0-9]+}} blocks in ({{.*}}) threads in ({{.*}}) : i64 dynamic_shared_memory_size %[[SMEM]] args(
// HOST: llvm.func @mgpuTensorMapEncodeTiledMemref(i64, !llvm.ptr, i64, i64, i64, i64, i64, !llvm.ptr) -> !llvm.ptr

// WGMMA: .version 8.1
// WGMMA: .target sm_90a
// WGMMA-DAG: .shared .align 16 .b8 __dynamic_shmem__
// WGMMA-DAG: .shared .align 8 .b8 __mbarrier[16];
// WGMMA-DAG: .maxntid 256, 1, 1
// WGMMA-DAG: mbarrier.init.shared.b64
// WGMMA-DAG: prefetch.tensormap
// WGMMA-DAG: mbarrier.arrive.expect_tx.shared.b64
// WGMMA-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// WGMMA-DAG: mbarrier.try_wait.parity.shared.b64
// WGMMA-DAG: wgmma.fence.sync.aligned;
// WGMMA-DAG: wgmma.commit_group.sync.aligned;
// WGMMA-DAG: wgmma.wait_group.sync.aligned 0;
// F16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// BF16-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// RUN: FileCheck %s --check-prefix=COUNT --input-file=%t/f16.ptx
// Three boxes per K step (A, and B in two 64-column halves): those of the
// first stage before the loop, those of the step a stage ahead in its
// body; four wgmma (K = 64 in steps of 16) per K step, in the loop body.
// COUNT-COUNT-6: cp.async.bulk.tensor.2d
// COUNT-NOT: cp.async.bulk.tensor
// RUN: grep -c "wgmma.mma_async" %t/f16.ptx | FileCheck %s --check-prefix=WGCOUNT
// WGCOUNT: 4

// ptxas's figures (-v): no kernel
// spills, the wgmma kernel's accumulators (64 f32 per thread) included.
// PTXAS-NOT: bytes spill stores, {{[1-9]}}
// PTXAS: Compiling entry function 'linear_kernel_{{[0-9]+}}' for 'sm_90a'
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: Used {{[0-9]+}} registers
// PTXAS-NOT: bytes spill stores, {{[1-9]}}

// MMA-NOT: wgmma
// MMA-NOT: cp.async.bulk.tensor
// MMA: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// MMA-NOT: wgmma
// MMA-NOT: cp.async.bulk.tensor
func.func @linear(%x: tensor<?x128xf32>, %w: tensor<128x128xf32>) -> tensor<?x128xf32> {
  %y = moe.linear %x, %w : tensor<?x128xf32>, tensor<128x128xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// REQUIRES: ptxas
// Flash attention, forward and backward with XL memory and relative keys,
// through the GPU pipeline (moe-fuse-attention is on by default): four row
// kernels (forward; query rows; key rows; relative-key rows), one thread
// per row, whose PTX targets sm_80 and assembles; two of the backward ones
// launch as one (switchyard-gpu-merge-launches): three launches. The unfused lowering of
// the same function would launch a kernel per linalg.generic over
// [B, T, S, H] tensors instead.

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa" -o %t.mlir
// RUN: FileCheck %s --input-file=%t.mlir
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: %python %S/Inputs/extract_ptx.py %t.mlir %t.dir
// RUN: FileCheck %s --input-file=%t.dir/flash_kernels.ptx --check-prefix=PTX
// RUN: FileCheck %s --input-file=%t.dir/flash_kernels.ptx --check-prefix=PTXBODY
// RUN: %ptxas -arch=sm_80 %t.dir/flash_kernels.ptx -o %t.dir/flash_kernels.cubin
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa fuse=router,expert-projection experts=dense" | FileCheck %s --check-prefix=UNFUSED

// CHECK-LABEL: llvm.func @flash(
// CHECK-COUNT-3: gpu.launch_func <%{{.*}} : !llvm.ptr> @flash_kernels::@flash_kernel_{{[0-2]}} blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.return
// CHECK: gpu.binary @flash_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx81">

// The kernels loop over keys or queries (a backward branch) and use
// libdevice's expf and logf (linked in: no external __nv_ symbol left).
// PTX: .target sm_80
// PTX-COUNT-3: .visible .entry flash_kernel_{{[0-2]}}(
// PTX-NOT: .entry
// PTX-NOT: __nv_
// PTXBODY: ex2.approx
// PTXBODY: bra.uni

// Without the fusion, many more kernels.
// UNFUSED-LABEL: llvm.func @flash(
// UNFUSED-COUNT-5: gpu.launch_func
func.func @flash(%q: tensor<?x4x2x8xf32>, %k: tensor<?x6x2x8xf32>, %v: tensor<?x6x2x8xf32>, %r: tensor<6x2x8xf32>, %do: tensor<?x4x2x8xf32>) -> (tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<6x2x8xf32>) {
  %o = moe.attention %q, %k, %v rel(%r : tensor<6x2x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32> -> tensor<?x4x2x8xf32>
  %dq, %dk, %dv, %dr = moe.attention_grad %q, %k, %v, %do rel(%r : tensor<6x2x8xf32>) : tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x4x2x8xf32> -> tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<6x2x8xf32>
  return %o, %dq, %dk, %dv, %dr : tensor<?x4x2x8xf32>, tensor<?x4x2x8xf32>, tensor<?x6x2x8xf32>, tensor<?x6x2x8xf32>, tensor<6x2x8xf32>
}

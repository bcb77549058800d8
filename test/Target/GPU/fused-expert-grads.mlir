// REQUIRES: ptxas
// The gradients of SwitchHead's V and O projections through the GPU pipeline
// with moe-fuse-expert-projection on (the default): four row kernels per
// gradient op (input or heads, routing coefficients, weight, gates; the two
// ops share one coefficient kernel: same routes), one thread per row, whose
// PTX targets sm_80 and assembles. They launch as two kernels: the
// coefficients, then the six that read them, independent of each other,
// as one (switchyard-gpu-merge-launches). Unfused, the weight gradients go through the
// dense route sums [N, H·E, F] in device memory.

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa fuse=all experts=dense" -o %t.mlir
// RUN: FileCheck %s --input-file=%t.mlir
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: %python %S/Inputs/extract_ptx.py %t.mlir %t.dir
// RUN: FileCheck %s --input-file=%t.dir/grads_kernels.ptx --check-prefix=PTX
// RUN: %ptxas -arch=sm_80 %t.dir/grads_kernels.ptx -o %t.dir/grads_kernels.cubin
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa fuse=router,attention experts=dense" | FileCheck %s --check-prefix=UNFUSED

// CHECK-LABEL: llvm.func @grads(
// CHECK-COUNT-2: gpu.launch_func <%{{.*}} : !llvm.ptr> @grads_kernels::@grads_kernel_{{[0-1]}} blocks in
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.return
// CHECK: gpu.binary @grads_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80"

// PTX: .target sm_80
// PTX-COUNT-2: .visible .entry grads_kernel_{{[0-1]}}(
// PTX-NOT: .entry
// PTX-NOT: __nv_

// UNFUSED-LABEL: llvm.func @grads(
// UNFUSED-COUNT-5: gpu.launch_func
func.func @grads(%x: tensor<?x16xf32>, %wv: tensor<6x16x8xf32>, %wo: tensor<6x8x16xf32>, %g: tensor<?x2x2xf32>, %i: tensor<?x2x2xi32>, %v: tensor<?x2x8xf32>, %dy: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<6x16x8xf32>, tensor<?x2x2xf32>, tensor<6x8x16xf32>, tensor<?x2x2xf32>) {
  %dv, %dwo, %dgo = moe.expert_merge_grad %v, %wo, %g, %i, %dy : tensor<?x2x8xf32>, tensor<6x8x16xf32>, tensor<?x2x2xf32>, tensor<?x2x2xi32>, tensor<?x16xf32> -> tensor<?x2x8xf32>, tensor<6x8x16xf32>, tensor<?x2x2xf32>
  %dx, %dwv, %dgv = moe.expert_proj_grad %x, %wv, %g, %i, %dv : tensor<?x16xf32>, tensor<6x16x8xf32>, tensor<?x2x2xf32>, tensor<?x2x2xi32>, tensor<?x2x8xf32> -> tensor<?x16xf32>, tensor<6x16x8xf32>, tensor<?x2x2xf32>
  return %dx, %dwv, %dgv, %dwo, %dgo : tensor<?x16xf32>, tensor<6x16x8xf32>, tensor<?x2x2xf32>, tensor<6x8x16xf32>, tensor<?x2x2xf32>
}

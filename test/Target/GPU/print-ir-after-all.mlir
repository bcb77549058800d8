// REQUIRES: ptxas
// --mlir-print-ir-after-all shows every stage of the GPU target, from the
// moe ops to NVVM and the serialised binary.

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa fuse=all experts=dense" \
// RUN:   --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s

// CHECK: IR Dump After MoeFuseRouterPass (moe-fuse-router)
// CHECK: moe.fused_router
// CHECK: IR Dump After MoeFuseExpertProjectionPass (moe-fuse-expert-projection)
// CHECK: moe.fused_expert_proj
// CHECK: IR Dump After ConvertMoeToLinalgPass (convert-moe-to-linalg)
// CHECK: scf.forall
// CHECK: IR Dump After OneShotBufferizePass (one-shot-bufferize)
// CHECK: IR Dump After SwitchyardGpuDeviceMemoryPass (switchyard-gpu-device-memory)
// CHECK: gpu.alloc
// CHECK: IR Dump After SCFForallToParallelLoop (scf-forall-to-parallel)
// CHECK: scf.parallel
// CHECK: IR Dump After ConvertParallelLoopToGpuPass (convert-parallel-loops-to-gpu)
// CHECK: gpu.launch blocks
// CHECK: IR Dump After GpuKernelOutliningPass (gpu-kernel-outlining)
// CHECK: gpu.launch_func
// CHECK: IR Dump After GpuNVVMAttachTarget (nvvm-attach-target)
// CHECK: #nvvm.target<O = 3, chip = "sm_80"
// CHECK: IR Dump After ConvertGpuOpsToNVVMOps (convert-gpu-to-nvvm)
// CHECK: nvvm.read.ptx.sreg.ctaid.x
// CHECK: IR Dump After GpuToLLVMConversionPass (gpu-to-llvm)
// CHECK: llvm.call @mgpuStreamCreate
// CHECK: IR Dump After SwitchyardGpuModuleToBinaryPass (switchyard-gpu-module-to-binary)
// CHECK: gpu.binary @route_kernels
// CHECK-SAME: .target sm_80

func.func @route(%x: tensor<?x16xf32>, %w_sel: tensor<6x16xf32>,
                 %w_v: tensor<6x16x8xf32>) -> tensor<?x2x8xf32> {
  %s = moe.gate %x, %w_sel : tensor<?x16xf32>, tensor<6x16xf32> -> tensor<?x2x3xf32>
  %g, %i = moe.topk %s k(2) : tensor<?x2x3xf32> -> tensor<?x2x2xf32>, tensor<?x2x2xi32>
  %v = moe.expert_proj %x, %w_v, %g, %i : tensor<?x16xf32>, tensor<6x16x8xf32>, tensor<?x2x2xf32>, tensor<?x2x2xi32> -> tensor<?x2x8xf32>
  return %v : tensor<?x2x8xf32>
}

// REQUIRES: ptxas
// The routing of a SwitchHead value projection (gate, top-k, expert
// projection in the dense all-experts formulation) through the GPU pipeline with the fusions off: host code in
// the LLVM dialect that allocates device buffers and launches one kernel per
// linalg op on one stream, and one gpu.binary whose PTX targets sm_80 and
// assembles. (fused-routing.mlir: the same with the fusions on.)

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa fuse=attention experts=dense" -o %t.mlir
// RUN: FileCheck %s --input-file=%t.mlir
// RUN: FileCheck %s --input-file=%t.mlir --check-prefix=LOWERED
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: %python %S/Inputs/extract_ptx.py %t.mlir %t.dir
// RUN: FileCheck %s --input-file=%t.dir/route_kernels.ptx --check-prefix=PTX
// RUN: %ptxas -arch=sm_80 %t.dir/route_kernels.ptx -o %t.dir/route_kernels.cubin

// Host: one stream per call; the result-sized buffers, the scores, the
// dense gates and the all-experts projections are device allocations;
// the logits with the projection through every expert (one contraction;
// both read only the input: switchyard-gpu-merge-launches launches them as
// one kernel), sigmoid, top-k, dense gates and the gated sum over the
// experts are five launches in order on that stream (each reduction's
// threads store its initial zero: no fill kernels); each temporary is freed
// on it after its last kernel; the result is returned (the caller owns it)
// after one synchronisation.
// CHECK-LABEL: llvm.func @route(
// CHECK: %[[STREAM:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-COUNT-2: llvm.call @mgpuMemAlloc({{.*}}, %[[STREAM]], {{.*}})
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @route_kernels::@route_kernel_0 blocks in
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @route_kernels::@route_kernel_1 blocks in
// CHECK-COUNT-2: llvm.call @mgpuMemAlloc({{.*}}, %[[STREAM]], {{.*}})
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @route_kernels::@route_kernel_2 blocks in
// CHECK: llvm.call @mgpuMemFree({{.*}}, %[[STREAM]])
// CHECK: llvm.call @mgpuMemAlloc({{.*}}, %[[STREAM]], {{.*}})
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @route_kernels::@route_kernel_3 blocks in
// CHECK-COUNT-2: llvm.call @mgpuMemFree({{.*}}, %[[STREAM]])
// CHECK: llvm.call @mgpuMemAlloc({{.*}}, %[[STREAM]], {{.*}})
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @route_kernels::@route_kernel_4 blocks in
// CHECK-NOT: gpu.launch_func
// CHECK-COUNT-2: llvm.call @mgpuMemFree({{.*}}, %[[STREAM]])
// CHECK: llvm.call @mgpuStreamSynchronize(%[[STREAM]])
// CHECK: llvm.call @mgpuStreamDestroy(%[[STREAM]])
// CHECK: llvm.return
// CHECK: gpu.binary @route_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx81">, properties = {{.*}}, assembly = "

// Nothing but the LLVM dialect and the launches is left, and the host reads
// no buffer: its only loads are in the C interface wrapper, if any.
// LOWERED-NOT: {{^ *(%[^ ]+ = )?(linalg|memref|scf|cf|arith|math|tensor|func|affine|bufferization)\.}}
// LOWERED-NOT: llvm.load

// The kernels: PTX 7.0 for sm_80 (the lowest that knows the chip), five
// entries, libdevice's expf linked in (no external __nv_ symbol left).
// PTX: .version 8.1
// PTX: .target sm_80
// PTX-COUNT-5: .visible .entry route_kernel_{{[0-9]}}(
// PTX-NOT: .entry
// PTX-NOT: __nv_
func.func @route(%x: tensor<?x16xf32>, %ws: tensor<6x16xf32>, %wv: tensor<6x16x8xf32>) -> tensor<?x2x8xf32> {
  %s = moe.gate %x, %ws : tensor<?x16xf32>, tensor<6x16xf32> -> tensor<?x2x3xf32>
  %g, %i = moe.topk %s k(2) : tensor<?x2x3xf32> -> tensor<?x2x2xf32>, tensor<?x2x2xi32>
  %p = moe.expert_proj %x, %wv, %g, %i : tensor<?x16xf32>, tensor<6x16x8xf32>, tensor<?x2x2xf32>, tensor<?x2x2xi32> -> tensor<?x2x8xf32>
  return %p : tensor<?x2x8xf32>
}

// REQUIRES: ptxas
// The routing of moe-routing.mlir with the fusions on (the default): the
// router (matmul, sigmoid, top-k) is one kernel and the gathered expert
// projection another, each a row kernel with one thread per (token, head)
// (and output chunk); the PTX targets sm_80 and assembles. With the fusions
// off the same function takes eight kernels (moe-routing.mlir).

// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa fuse=all experts=dense" -o %t.mlir
// RUN: FileCheck %s --input-file=%t.mlir
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: %python %S/Inputs/extract_ptx.py %t.mlir %t.dir
// RUN: FileCheck %s --input-file=%t.dir/route_kernels.ptx --check-prefix=PTX
// RUN: %ptxas -arch=sm_80 %t.dir/route_kernels.ptx -o %t.dir/route_kernels.cubin

// The router writes values and indices (the scores have no other user, so
// no score buffer); the projection reads them.
// CHECK-LABEL: llvm.func @route(
// CHECK: %[[STREAM:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-COUNT-2: llvm.call @mgpuMemAlloc({{.*}}, %[[STREAM]], {{.*}})
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @route_kernels::@route_kernel_0 blocks in
// CHECK: llvm.call @mgpuMemAlloc({{.*}}, %[[STREAM]], {{.*}})
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @route_kernels::@route_kernel_1 blocks in
// CHECK-NOT: gpu.launch_func
// CHECK-COUNT-2: llvm.call @mgpuMemFree({{.*}}, %[[STREAM]])
// CHECK: llvm.call @mgpuStreamSynchronize(%[[STREAM]])

// PTX: .target sm_80
// PTX-COUNT-2: .visible .entry route_kernel_{{[0-1]}}(
// PTX-NOT: .entry
// PTX-NOT: __nv_
func.func @route(%x: tensor<?x16xf32>, %ws: tensor<6x16xf32>, %wv: tensor<6x16x8xf32>) -> tensor<?x2x8xf32> {
  %s = moe.gate %x, %ws : tensor<?x16xf32>, tensor<6x16xf32> -> tensor<?x2x3xf32>
  %g, %i = moe.topk %s k(2) : tensor<?x2x3xf32> -> tensor<?x2x2xf32>, tensor<?x2x2xi32>
  %p = moe.expert_proj %x, %wv, %g, %i : tensor<?x16xf32>, tensor<6x16x8xf32>, tensor<?x2x2xf32>, tensor<?x2x2xi32> -> tensor<?x2x8xf32>
  return %p : tensor<?x2x8xf32>
}

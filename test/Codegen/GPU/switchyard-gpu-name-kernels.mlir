// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-name-kernels))" | FileCheck %s

// Every launch of @step outlines into @step_kernels, numbered in order; a
// launch that names its own kernel keeps it.
// CHECK-LABEL: func.func @step
// CHECK: gpu.launch {{.*}} module(@step_kernels) function(@step_kernel_0)
// CHECK: gpu.launch {{.*}} module(@mine) function(@k)
// CHECK: gpu.launch {{.*}} module(@step_kernels) function(@step_kernel_2)
func.func @step(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %f, %x[%c0] : memref<4xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) module(@mine) function(@k) {
    memref.store %f, %x[%c0] : memref<4xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %f, %x[%c0] : memref<4xf32>
    gpu.terminator
  }
  return
}

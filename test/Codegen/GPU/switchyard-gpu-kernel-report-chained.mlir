// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-chain-launches),switchyard-gpu-kernel-report)" -o /dev/null | FileCheck %s

// A single-thread sum of 1000 elements chained onto the launch before it
// (switchyard-gpu-chain-launches): one launch. Its threads' work per
// thread is the first body's and the count of the block (the tail's branch
// counted as one operation, not the 4000 of the sum); the tail runs once
// per launch, in the last block, so the estimate adds it once. The counter of the first launch of a function
// is zeroed by a memset, which the report counts apart.
// CHECK: kernel report: 1 launches in the IR
// CHECK-NEXT: estimate
// CHECK-NEXT: share launch   threads  grid            block         shared    ops/thr    mem/thr  kernel
// CHECK-NEXT: 100.0%      1  1.69e+06  6592x1x1        256x1x1            4         23          5  launch #0
// CHECK: launches per call: @f 1{{$}}
// CHECK-NEXT: memsets per call: @f 1{{$}}

func.func @f() {
  %x = gpu.alloc() : memref<1000xf32>
  %a = gpu.alloc() : memref<1687552xf32>
  %b = gpu.alloc() : memref<1687552xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c1000 = arith.constant 1000 : index
  %c6592 = arith.constant 6592 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c6592, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tx : index
    %v = memref.load %a[%i] : memref<1687552xf32>
    memref.store %v, %b[%i] : memref<1687552xf32>
    gpu.terminator
  }
  %sum = gpu.alloc() : memref<1xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %i = %c0 to %c1000 step %c1 {
      %r = memref.load %x[%i] : memref<1000xf32>
      %s = memref.load %sum[%c0] : memref<1xf32>
      %v = arith.addf %s, %r : f32
      memref.store %v, %sum[%c0] : memref<1xf32>
    }
    gpu.terminator
  }
  return
}

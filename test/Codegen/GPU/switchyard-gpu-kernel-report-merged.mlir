// RUN: switchyard-opt %s --pass-pipeline="builtin.module(func.func(switchyard-gpu-merge-launches),switchyard-gpu-kernel-report)" -o /dev/null | FileCheck %s

// A launch that switchyard-gpu-merge-launches made of two: each block runs
// its own body, so the report weighs each body's work by its blocks. One
// block of 256 threads, each summing 1000 elements (per element two loads,
// an addf and a store), and 6592 blocks whose threads copy one element:
// per thread, the blocks' mean (the merge's index arithmetic included);
// the estimate is the threads' work over the 270,336 resident threads, but
// no less than the longest thread's (a summing thread's 4000 and more). So
// the merged launch weighs as much as the single thread that sums the same
// 1000 elements alone (1 wave of 4000), not 7 waves of 4000.
// CHECK: kernel report: 2 launches in the IR
// CHECK: share launch   threads  grid            block         shared    ops/thr    mem/thr  kernel
// CHECK-NEXT: 50.0%      1  1.69e+06  6593x1x1        256x1x1            0          7          2  launch #0
// CHECK-NEXT: 50.0%      1         1  1x1x1           1x1x1              0       1000       3000  launch #1
// CHECK: launches per call: @f 2{{$}}

func.func @f() {
  %x = memref.alloc() : memref<1000xf32>
  %sum = memref.alloc() : memref<256xf32>
  %a = memref.alloc() : memref<1687552xf32>
  %b = memref.alloc() : memref<1687552xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %c1000 = arith.constant 1000 : index
  %c6592 = arith.constant 6592 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    scf.for %i = %c0 to %c1000 step %c1 {
      %r = memref.load %x[%i] : memref<1000xf32>
      %s = memref.load %sum[%tx] : memref<256xf32>
      %v = arith.addf %s, %r : f32
      memref.store %v, %sum[%tx] : memref<256xf32>
    }
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c6592, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tx : index
    %v = memref.load %a[%i] : memref<1687552xf32>
    memref.store %v, %b[%i] : memref<1687552xf32>
    gpu.terminator
  }
  %single = memref.alloc() : memref<1xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %i = %c0 to %c1000 step %c1 {
      %r = memref.load %x[%i] : memref<1000xf32>
      %s = memref.load %single[%c0] : memref<1xf32>
      %v = arith.addf %s, %r : f32
      memref.store %v, %single[%c0] : memref<1xf32>
    }
    gpu.terminator
  }
  return
}

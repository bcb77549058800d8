// RUN: switchyard-opt %s --switchyard-gpu-kernel-report -o /dev/null | FileCheck %s
// RUN: switchyard-opt %s --switchyard-gpu-kernel-report="dynamic-size=1024 sm-count=1 top=2" -o /dev/null | FileCheck %s --check-prefix=TOP
// RUN: not switchyard-opt %s --switchyard-gpu-kernel-report="sm-count=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: switchyard-opt %s --switchyard-gpu-kernel-report="output=%t.txt" | FileCheck %s --check-prefix=IR
// RUN: FileCheck %s --input-file=%t.txt

// The table: one row per gpu.launch, sorted by launches x waves x work per
// thread. Sizes come from constants, index arithmetic, memref.dim of an
// allocation or of a collapsed argument (dynamic dimension = dynamic-size,
// 16 by default), and host loops around a launch multiply it.
// CHECK: kernel report: 4 launches in the IR; dynamic sizes 16, 132 SMs x 2048 threads
// CHECK-NEXT: estimate = launches x waves x work per thread
// CHECK-NEXT: share launch   threads  grid            block         shared    ops/thr    mem/thr  kernel
// Three launches of a 412-thread kernel in a host loop, each thread
// summing the 16 x 256 rows of a collapsed [?, 256, 412] argument: per row
// an addf, two loads and a store; the index arithmetic, the compare and
// the scf.if once. 3 x 16387 of the 65548 + 16384 + ... in all: 75%.
// CHECK-NEXT:   75.0%      3       512  2x1x1           256x1x1            0       4099      12288  f_kernel_1
// A single thread summing 4096 elements.
// CHECK-NEXT:   25.0%      1         1  1x1x1           1x1x1              0       4096      12288  f_kernel_0
// An elementwise kernel over the allocation [16 * 256, 412]: a load and a
// store per thread.
// CHECK-NEXT:    0.0%      1  1.69e+06  6592x1x1        256x1x1            0          0          2  f_kernel_3
// A loop bounded by a loaded value: counted once, marked +.
// CHECK-NEXT:    0.0%      1      4096  16x1x1          256x1x1          128         1+         3+  f_kernel_2
// CHECK-NEXT: ?: unknown; +: a loop of unknown trip count counted once
// The launches of one call of each public function: 3 + 1 + 1 + 1.
// CHECK-NEXT: launches per call: @f 6{{$}}

// TOP: kernel report: 4 launches in the IR; dynamic sizes 1024, 1 SMs x 2048 threads
// With a batch of 1024 and one multiprocessor, f_kernel_1's threads sum
// 262,144 rows, three times (first); f_kernel_3's 1.08e8 threads fill
// 52,736 waves of two accesses.
// TOP: f_kernel_1
// TOP-NEXT: f_kernel_3
// TOP-NEXT: (2 more launches)

// BAD: switchyard-gpu-kernel-report: dynamic-size, sm-count and threads-per-sm must be positive

// The IR is unchanged.
// IR: func.func @f(
// IR-COUNT-4: gpu.launch

func.func @f(%x: memref<?x256x412xf32>, %sum: memref<f32>, %n: memref<index>, %y: memref<412xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c16 = arith.constant 16 : index
  %c256 = arith.constant 256 : index
  %c412 = arith.constant 412 : index
  %c4096 = arith.constant 4096 : index
  %c128_i32 = arith.constant 128 : i32
  %flat = memref.collapse_shape %x [[0, 1], [2]] : memref<?x256x412xf32> into memref<?x412xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %i = %c0 to %c4096 step %c1 {
      %r = memref.load %flat[%i, %c0] : memref<?x412xf32>
      %s = memref.load %sum[] : memref<f32>
      %a = arith.addf %s, %r : f32
      memref.store %a, %sum[] : memref<f32>
    }
    gpu.terminator
  } {function = @f_kernel_0}
  %rows = memref.dim %flat, %c0 : memref<?x412xf32>
  %blocks = arith.ceildivui %c412, %c256 : index
  scf.for %rep = %c0 to %c3 step %c1 {
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %blocks, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
      %col = affine.apply affine_map<(d0, d1) -> (d0 * 256 + d1)>(%bx, %tx)
      %in = arith.cmpi ult, %col, %c412 : index
      scf.if %in {
        scf.for %i = %c0 to %rows step %c1 {
          %r = memref.load %flat[%i, %col] : memref<?x412xf32>
          %s = memref.load %y[%col] : memref<412xf32>
          %a = arith.addf %s, %r : f32
          memref.store %a, %y[%col] : memref<412xf32>
        }
      }
      gpu.terminator
    } {function = @f_kernel_1}
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c16, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1)
             dynamic_shared_memory_size %c128_i32 {
    %bound = memref.load %n[] : memref<index>
    scf.for %i = %c0 to %bound step %c1 {
      %s = memref.load %sum[] : memref<f32>
      %a = arith.addf %s, %s : f32
      memref.store %a, %sum[] : memref<f32>
    }
    gpu.terminator
  } {function = @f_kernel_2}
  %buf = gpu.alloc (%rows) : memref<?x412xf32>
  %m = memref.dim %buf, %c0 : memref<?x412xf32>
  %elems = arith.muli %m, %c412 : index
  %g = arith.ceildivui %elems, %c256 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %g, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %v = memref.load %sum[] : memref<f32>
    memref.store %v, %buf[%c0, %c0] : memref<?x412xf32>
    gpu.terminator
  } {function = @f_kernel_3}
  gpu.dealloc %buf : memref<?x412xf32>
  return
}

// RUN: switchyard-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(switchyard-gpu-launch-to-host-loops))" --verify-diagnostics | FileCheck %s

// The wgmma route's ops (HopperOps.cpp): a TMA load of an 8 x 64 bf16 box
// into 128-byte swizzled shared memory at byte 1024, signalled on an
// mbarrier that thread 0 initialises and arms, and a wait by every thread.
// The load becomes loops over the box that read the global buffer (zero
// outside it: unsigned compares against its extents) and store at the
// swizzled address (bits 4-6 XOR bits 7-9); the mbarrier is four i64 per
// barrier in a host buffer; the wait asserts that its phase completed and
// that no byte arrived past it. No nvgpu op and no descriptor is left.
// CHECK-LABEL: func.func @tma_load
// CHECK-SAME: (%[[X:.*]]: memref<?x64xbf16>
// CHECK-NOT: nvgpu.
// CHECK: %[[STATE:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x4xi64>
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step
// CHECK:   scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step
// CHECK:     arith.cmpi ult
// CHECK:     arith.cmpi ult
// CHECK:     scf.if %{{.*}} -> (bf16) {
// CHECK:       memref.load %[[X]]
// CHECK:     } else {
// CHECK:       scf.yield %[[ZERO]] : bf16
// CHECK:     %[[HIGH:.*]] = arith.shrui %{{.*}}, %{{.*}} : index
// CHECK:     %[[BITS:.*]] = arith.andi %[[HIGH]], %{{.*}} : index
// CHECK:     arith.xori %{{.*}}, %[[BITS]] : index
// CHECK: cf.assert %{{.*}}, "GPU emulation: a thread waits on an mbarrier phase that has not completed
// CHECK: cf.assert %{{.*}}, "GPU emulation: TMA loads completed more bytes on an mbarrier than arrive.expect_tx announced
// CHECK-NOT: nvgpu.
// CHECK: memref.dealloc %[[STATE]]
!box = memref<8x64xbf16, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!barriers = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
func.func @tma_load(%x: memref<?x64xbf16>, %out: memref<128xbf16>, %row: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c1024 = arith.constant 1024 : index
  %bytes = arith.constant 1024 : index
  %ticks = arith.constant 1000 : index
  %false = arith.constant false
  %smem = arith.constant 2048 : i32
  %unranked = memref.cast %x : memref<?x64xbf16> to memref<*xbf16>
  %desc = nvgpu.tma.create.descriptor %unranked box[%c8, %c64] : memref<*xbf16> -> !map
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1)
             dynamic_shared_memory_size %smem {
    %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %tile = memref.view %shared[%c1024][] : memref<?xi8, #gpu.address_space<workgroup>> to !box
    %bar = nvgpu.mbarrier.create -> !barriers
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      nvgpu.mbarrier.init %bar[%c0], %c1 : !barriers
      nvgpu.tma.prefetch.descriptor %desc : !map
      nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes : !barriers
      nvgpu.tma.async.load %desc[%c0, %row], %bar[%c0] to %tile : !map, !barriers -> !box
    }
    nvgpu.mbarrier.try_wait.parity %bar[%c0], %false, %ticks : !barriers
    %v = memref.load %tile[%c0, %tx] : !box
    memref.store %v, %out[%tx] : memref<128xbf16>
    gpu.terminator
  }
  return
}

// -----

// A warpgroup MMA over tiles of shared memory, its accumulators carried by
// a loop: one host buffer of 64 x 128 f32 per warpgroup (two here), zeroed,
// updated and copied out by each warpgroup's first thread between barriers
// (the threads are then serialised around them), the loop no longer
// carrying them.
// CHECK-LABEL: func.func @wgmma
// CHECK-NOT: nvgpu.
// CHECK: %[[ACC:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x64x128xf32>
// CHECK: arith.remui %{{.*}}, %{{.*}} : index
// CHECK: memref.store %{{.*}}, %[[ACC]]
// Each MMA first checks that its tiles start where the swizzle's pattern
// does (the descriptors' base offset is 0).
// CHECK: cf.assert %{{.*}}, "GPU emulation: a wgmma operand's tile with the 128-byte swizzle does not start at a multiple of 1024 bytes
// CHECK: scf.for {{.*}} {
// CHECK:   memref.load %[[ACC]]
// CHECK:   arith.extf %{{.*}} : bf16 to f32
// CHECK:   arith.mulf
// CHECK:   memref.store %{{.*}}, %[[ACC]]
// CHECK: memref.load %[[ACC]]
// CHECK-NOT: nvgpu.
// CHECK: memref.dealloc %[[ACC]]
!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!b = memref<64x128xbf16, #gpu.address_space<workgroup>>
!box = memref<64x64xbf16, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>
func.func @wgmma(%x: memref<?x64xbf16>, %out: memref<64x128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %c8192 = arith.constant 8192 : index
  %c16384 = arith.constant 16384 : index
  %smem = arith.constant 65536 : i32
  %unranked = memref.cast %x : memref<?x64xbf16> to memref<*xbf16>
  %desc = nvgpu.tma.create.descriptor %unranked box[%c64, %c64] : memref<*xbf16> -> !map
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1)
             dynamic_shared_memory_size %smem {
    %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %ta = memref.view %shared[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to !a
    %tb = memref.view %shared[%c8192][] : memref<?xi8, #gpu.address_space<workgroup>> to !b
    %tc = memref.view %shared[%c16384][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64x128xf32, #gpu.address_space<workgroup>>
    %init = nvgpu.warpgroup.mma.init.accumulator -> !acc
    %sum = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %init) -> (!acc) {
      %da = nvgpu.warpgroup.generate.descriptor %ta, %desc : !a, !map -> !nvgpu.warpgroup.descriptor<tensor = !a>
      %db = nvgpu.warpgroup.generate.descriptor %tb, %desc : !b, !map -> !nvgpu.warpgroup.descriptor<tensor = !b>
      %next = nvgpu.warpgroup.mma %da, %db, %acc {transposeB} : <tensor = !a>, <tensor = !b>, !acc -> !acc
      scf.yield %next : !acc
    }
    nvgpu.warpgroup.mma.store %sum, %tc : !acc to memref<64x128xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %v = memref.load %tc[%c0, %c0] : memref<64x128xf32, #gpu.address_space<workgroup>>
    memref.store %v, %out[%c0, %c0] : memref<64x128xf32>
    gpu.terminator
  }
  return
}

// -----

// B K-major (no transposeB) is not a form the wgmma kernels use.
!a = memref<64x64xbf16, #gpu.address_space<workgroup>>
!box = memref<64x64xbf16, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<64x64xf32>>
func.func @k_major_b(%x: memref<?x64xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %smem = arith.constant 16384 : i32
  %unranked = memref.cast %x : memref<?x64xbf16> to memref<*xbf16>
  %desc = nvgpu.tma.create.descriptor %unranked box[%c64, %c64] : memref<*xbf16> -> !map
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1)
             dynamic_shared_memory_size %smem {
    %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %ta = memref.view %shared[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to !a
    %init = nvgpu.warpgroup.mma.init.accumulator -> !acc
    %da = nvgpu.warpgroup.generate.descriptor %ta, %desc : !a, !map -> !nvgpu.warpgroup.descriptor<tensor = !a>
    // expected-error @below {{'nvgpu.warpgroup.mma' op is emulated as wgmma with A K-major (rows as wide as its swizzle) and B N-major (transposeB)}}
    %next = nvgpu.warpgroup.mma %da, %da, %init : <tensor = !a>, <tensor = !a>, !acc -> !acc
    gpu.terminator
  }
  return
}

// -----

// A TMA descriptor passed in: the emulation cannot find the tensor it
// describes.
!box = memref<8x64xbf16, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!barriers = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
func.func @opaque_descriptor(%desc: !map) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %smem = arith.constant 1024 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1)
             dynamic_shared_memory_size %smem {
    %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %tile = memref.view %shared[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to !box
    %bar = nvgpu.mbarrier.create -> !barriers
    // expected-error @below {{'nvgpu.tma.async.load' op takes a TMA descriptor that the GPU emulation cannot trace to nvgpu.tma.create.descriptor of a ranked buffer}}
    nvgpu.tma.async.load %desc[%c0, %c0], %bar[%c0] to %tile : !map, !barriers -> !box
    gpu.terminator
  }
  return
}

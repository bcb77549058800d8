// RUN: switchyard-opt %s --split-input-file --switchyard-gpu-share-kernels | FileCheck %s

// A kernel identical to one before it, in its gpu.module or another, is
// erased and its launches launch the first; a module left empty goes. A
// kernel that differs in a constant, or in its type, stays.
// CHECK-LABEL: func.func @forward(
// CHECK: gpu.launch_func  @forward_kernels::@forward_kernel_0 {{.*}} args(%[[A:.*]] : memref<64xf32>)
// CHECK: gpu.launch_func  @forward_kernels::@forward_kernel_0 {{.*}} args(%[[B:.*]] : memref<64xf32>)
// CHECK: gpu.launch_func  @forward_kernels::@forward_kernel_2
// CHECK: gpu.launch_func  @forward_kernels::@forward_kernel_3
// CHECK-LABEL: func.func @backward(
// CHECK: gpu.launch_func  @forward_kernels::@forward_kernel_0
// CHECK-LABEL: gpu.module @forward_kernels
// CHECK: gpu.func @forward_kernel_0(
// CHECK-NOT: gpu.func @forward_kernel_1(
// CHECK: gpu.func @forward_kernel_2(
// CHECK: arith.constant 3.000000e+00
// CHECK: gpu.func @forward_kernel_3(%{{.*}}: memref<32xf32>)
// CHECK-NOT: gpu.module @backward_kernels
module attributes {gpu.container_module} {
  func.func @forward(%a: memref<64xf32>, %b: memref<64xf32>, %c: memref<32xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @forward_kernels::@forward_kernel_0 blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>)
    gpu.launch_func @forward_kernels::@forward_kernel_1 blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%b : memref<64xf32>)
    gpu.launch_func @forward_kernels::@forward_kernel_2 blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>)
    gpu.launch_func @forward_kernels::@forward_kernel_3 blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%c : memref<32xf32>)
    return
  }
  func.func @backward(%a: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @backward_kernels::@backward_kernel_0 blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%a : memref<64xf32>)
    return
  }
  gpu.module @forward_kernels {
    gpu.func @forward_kernel_0(%x: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %two = arith.constant 2.0 : f32
      %v = memref.load %x[%i] : memref<64xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %x[%i] : memref<64xf32>
      gpu.return
    }
    gpu.func @forward_kernel_1(%x: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %two = arith.constant 2.0 : f32
      %v = memref.load %x[%i] : memref<64xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %x[%i] : memref<64xf32>
      gpu.return
    } loc("elsewhere")
    gpu.func @forward_kernel_2(%x: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %three = arith.constant 3.0 : f32
      %v = memref.load %x[%i] : memref<64xf32>
      %w = arith.mulf %v, %three : f32
      memref.store %w, %x[%i] : memref<64xf32>
      gpu.return
    }
    gpu.func @forward_kernel_3(%x: memref<32xf32>) kernel {
      %i = gpu.thread_id x
      %two = arith.constant 2.0 : f32
      %v = memref.load %x[%i] : memref<32xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %x[%i] : memref<32xf32>
      gpu.return
    }
  }
  gpu.module @backward_kernels {
    gpu.func @backward_kernel_0(%x: memref<64xf32>) kernel {
      %i = gpu.thread_id x
      %two = arith.constant 2.0 : f32
      %v = memref.load %x[%i] : memref<64xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %x[%i] : memref<64xf32>
      gpu.return
    }
  }
}

// -----

// Kernels that call a function of their module stay, identical or not: the
// functions of the same name may differ.
// CHECK-LABEL: gpu.module @a_kernels
// CHECK: gpu.func @a_kernel_0(
// CHECK-LABEL: gpu.module @b_kernels
// CHECK: gpu.func @b_kernel_0(
module attributes {gpu.container_module} {
  func.func @a(%x: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a_kernels::@a_kernel_0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<64xf32>)
    gpu.launch_func @b_kernels::@b_kernel_0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<64xf32>)
    return
  }
  gpu.module @a_kernels {
    func.func @f(%v: f32) -> f32 {
      return %v : f32
    }
    gpu.func @a_kernel_0(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<64xf32>
      %w = func.call @f(%v) : (f32) -> f32
      memref.store %w, %x[%c0] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @b_kernels {
    func.func @f(%v: f32) -> f32 {
      %w = arith.addf %v, %v : f32
      return %w : f32
    }
    gpu.func @b_kernel_0(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<64xf32>
      %w = func.call @f(%v) : (f32) -> f32
      memref.store %w, %x[%c0] : memref<64xf32>
      gpu.return
    }
  }
}

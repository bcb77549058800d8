// RUN: switchyard-opt %s --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=bf16}))' -verify-diagnostics

// moe.flash_attention_kernel and moe.flash_attention_grad_kernel have no
// lowering but the tensor-core kernels.
func.func @flash_attention(%q: memref<2x4x1x16xf32>, %l: memref<2x4x1xf32>) {
  // expected-error @+1 {{'moe.flash_attention_kernel' op needs tensor cores (switchyard-gpu-tensor-core-matmul tensor-cores=true)}}
  moe.flash_attention_kernel ins(%q, %q, %q : memref<2x4x1x16xf32>, memref<2x4x1x16xf32>, memref<2x4x1x16xf32>) outs(%q, %l : memref<2x4x1x16xf32>, memref<2x4x1xf32>)
  return
}

func.func @flash_attention_grad(%q: memref<2x4x1x16xf32>, %l: memref<2x4x1xf32>) {
  // expected-error @+1 {{'moe.flash_attention_grad_kernel' op needs tensor cores (switchyard-gpu-tensor-core-matmul tensor-cores=true)}}
  moe.flash_attention_grad_kernel ins(%q, %q, %q, %l, %l, %q : memref<2x4x1x16xf32>, memref<2x4x1x16xf32>, memref<2x4x1x16xf32>, memref<2x4x1xf32>, memref<2x4x1xf32>, memref<2x4x1x16xf32>) outs(%q, %q, %q : memref<2x4x1x16xf32>, memref<2x4x1x16xf32>, memref<2x4x1x16xf32>)
  return
}

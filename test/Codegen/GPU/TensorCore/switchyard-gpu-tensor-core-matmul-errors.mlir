// RUN: switchyard-opt %s --pass-pipeline='builtin.module(func.func(switchyard-gpu-tensor-core-matmul{element-type=f8 tensor-cores=true}))' -verify-diagnostics

// expected-error @+1 {{switchyard-gpu-tensor-core-matmul: unsupported element-type 'f8'; expected f32, bf16 or f16}}
func.func @f() {
  return
}

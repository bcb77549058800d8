// RUN: switchyard-opt %s --pass-pipeline='builtin.module(func.func(switchyard-round-contraction-operands{element-type=f8}))' -verify-diagnostics

// expected-error @+1 {{switchyard-round-contraction-operands: unsupported element-type 'f8'; expected f32, bf16 or f16}}
func.func @f() {
  return
}

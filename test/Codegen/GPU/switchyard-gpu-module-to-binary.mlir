// RUN: switchyard-opt %s --switchyard-gpu-module-to-binary="format=isa" | FileCheck %s
// RUN: not switchyard-opt %s --switchyard-gpu-module-to-binary="format=elf" 2>&1 | FileCheck %s --check-prefix=BAD

// Each gpu.module becomes a gpu.binary of the same name, in place, with the
// PTX of its kernels (serialized concurrently, as upstream's pass would
// serialize them one after another).
// CHECK-NOT: gpu.module
// CHECK: gpu.binary @first [#gpu.object<#nvvm.target<chip = "sm_80">, {{.*}}assembly = "{{.*}}.entry first_kernel
// CHECK: llvm.func @between
// CHECK: gpu.binary @second [#gpu.object<#nvvm.target<chip = "sm_80">, {{.*}}assembly = "{{.*}}.entry second_kernel
// BAD: unknown format 'elf' (llvm, isa, bin or fatbin)
module attributes {gpu.container_module} {
  gpu.module @first [#nvvm.target<chip = "sm_80">] {
    llvm.func @first_kernel() attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
  llvm.func @between() {
    llvm.return
  }
  gpu.module @second [#nvvm.target<chip = "sm_80">] {
    llvm.func @second_kernel() attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
}

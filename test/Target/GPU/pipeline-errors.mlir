// Bad options of the GPU pipeline are reported, naming the option and what
// it accepts; nothing is emitted.

// RUN: not switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_70" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not switchyard-opt %s --switchyard-gpu-pipeline="format=elf" 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not switchyard-opt %s --switchyard-gpu-pipeline="block-size=2048" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not switchyard-opt %s --switchyard-gpu-pipeline="opt-level=4" 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not switchyard-opt %s --switchyard-gpu-pipeline="toolkit=%t.missing format=bin" 2>&1 | FileCheck %s --check-prefix=TOOLKIT
// RUN: not switchyard-opt %s --switchyard-gpu-pipeline="element-type=f64" 2>&1 | FileCheck %s --check-prefix=ELEMENT

// CHIP: error: switchyard-gpu-pipeline option chip: expected one of sm_75, sm_80, {{.*}}, found 'sm_70'
// CHIP-NOT: gpu.binary
// FORMAT: error: switchyard-gpu-pipeline option format: expected bin, fatbin or isa, found 'elf'
// BLOCK: error: switchyard-gpu-pipeline option block-size: expected 1 to 1024, found 2048
// OPT: error: switchyard-gpu-pipeline option opt-level: expected 0 to 3, found 4
// ELEMENT: error: switchyard-gpu-pipeline option element-type: expected f32, bf16 or f16, found 'f64'
// ELEMENT-NOT: gpu.binary
// The GPU emulation checks the options it shares.
// RUN: not switchyard-opt %s --switchyard-gpu-emulation-pipeline="block-size=0" 2>&1 | FileCheck %s --check-prefix=EMU-BLOCK
// RUN: not switchyard-opt %s --switchyard-gpu-emulation-pipeline="element-type=f8" 2>&1 | FileCheck %s --check-prefix=EMU-ELEMENT
// EMU-BLOCK: error: switchyard-gpu-emulation-pipeline option block-size: expected 1 to 1024, found 0
// EMU-ELEMENT: error: switchyard-gpu-emulation-pipeline option element-type: expected f32, bf16 or f16, found 'f8'
// TOOLKIT: error: switchyard-gpu-pipeline option toolkit: '{{.*}}.missing' is not a directory; expected the CUDA toolkit root (bin/ptxas, nvvm/libdevice)
func.func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

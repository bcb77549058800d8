// Every target takes its fusion and expert defaults from one place
// (FusionOptions::targetDefault), the same the driver and the runtime use:
// the CPU fuses the router and the expert projections, whose kernels are
// its own (the logits a matmul; the grouped kernels, tiles as tall as the
// register tile, gathering while packing), and groups the unfused expert
// projections by expert; the GPU target and its emulation fuse the router
// and the attention and group the unfused expert projections, padded to
// 64-row tiles. Both fuse elementwise ops, the GPU rows too; `none` does
// neither.
// RUN: switchyard-opt %s --switchyard-cpu-pipeline --dump-pass-pipeline -o %t 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: switchyard-opt %s --switchyard-gpu-pipeline="chip=sm_80 format=isa" --dump-pass-pipeline -o %t 2>&1 | FileCheck %s --check-prefix=GPU
// RUN: switchyard-opt %s --switchyard-gpu-emulation-pipeline --dump-pass-pipeline -o %t 2>&1 | FileCheck %s --check-prefix=GPU
// The settings are checked when the pipeline's options are parsed.
// RUN: not switchyard-opt %s --switchyard-cpu-pipeline="fuse=router,gate" 2>&1 | FileCheck %s --check-prefix=BAD-FUSE
// RUN: not switchyard-opt %s --switchyard-gpu-pipeline="experts=sparse" 2>&1 | FileCheck %s --check-prefix=BAD-EXPERTS
// An explicit setting overrides the target's default.
// RUN: switchyard-opt %s --switchyard-cpu-pipeline="fuse=router experts=dense" --dump-pass-pipeline -o %t 2>&1 | FileCheck %s --check-prefix=CPU-SET

// CPU: convert-lm-to-func,
// CPU-NOT: moe-fuse-attention
// CPU: moe-fuse-router,
// CPU-NOT: moe-fuse-attention
// CPU: moe-fuse-expert-projection,
// CPU-NOT: moe-fuse-attention
// CPU: convert-moe-to-linalg{{.*}}fused-expert-tile-rows=8 fused-router-matmul=true grouped-experts=true grouped-tile-rows=0
// CPU: switchyard-fuse-elementwise
// CPU-NOT: switchyard-split-whole-reductions
// CPU-NOT: switchyard-fuse-rows
// CPU: switchyard-cpu-grouped-kernels{columns=32 panel-kib=256 rows=8}

// GPU: convert-lm-to-func,
// GPU-NEXT: lm-hoist-block-invariants,
// GPU-NEXT: moe-fuse-router,
// GPU-NEXT: moe-fuse-attention,
// GPU-NEXT: convert-moe-to-linalg{{.*}}grouped-experts=true grouped-tile-rows=64
// GPU: switchyard-fuse-elementwise
// GPU-NEXT: switchyard-split-whole-reductions{{.*}}
// GPU-NEXT: switchyard-fuse-rows

// BAD-FUSE: unknown fusion 'gate'; expected default, all, none, or a comma-separated list of router, expert-projection, attention, elementwise, rows
// BAD-EXPERTS: expected default, grouped or dense, found 'sparse'

// CPU-SET: convert-lm-to-func,
// CPU-SET-NEXT: lm-hoist-block-invariants,
// CPU-SET-NEXT: moe-fuse-router,
// CPU-SET-NEXT: convert-moe-to-linalg{{.*}}grouped-experts=false
// CPU-SET-NOT: switchyard-fuse-elementwise
// CPU-SET-NOT: switchyard-fuse-rows

lm.model @m(%t: tensor<?x8xi32>) -> tensor<?x8x16xf32> {
  %x0 = lm.embed "embed" %t {vocab = 16} : tensor<?x8xi32> -> tensor<?x8x16xf32>
  %a0 = lm.switchhead "layers.0.att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x8x16xf32>
  %l = lm.output "out" %a0 {vocab = 16} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
  lm.return %l : tensor<?x8x16xf32>
}

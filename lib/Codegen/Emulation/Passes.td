//===- Passes.td - Switchyard GPU emulation passes --------*- tablegen -*-===//
//
// The GPU emulation: kernels turned into host loops over blocks and
// threads, run on the CPU.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_EMULATION_PASSES_TD
#define SWITCHYARD_LIB_CODEGEN_EMULATION_PASSES_TD

include "mlir/Pass/PassBase.td"

def SwitchyardGpuLaunchToHostLoopsPass
    : Pass<"switchyard-gpu-launch-to-host-loops", "::mlir::func::FuncOp"> {
  let summary = "Run the GPU target's kernels on the host: each gpu.launch as loops over its blocks and threads";
  let description = [{
    The GPU emulation's step (`switchyard-gpu-emulation-pipeline`), in the
    spirit of Triton's interpreter mode: the kernels that the GPU target
    formed run on the CPU, so that the GPU route's code (the moe fusions'
    row kernels, the mapping of loops to blocks and threads and its bounds
    checks, the host code's kernels) can be executed and compared with the
    CPU target on a machine with no GPU. It takes a function after
    `switchyard-gpu-launch-host-compute` and before outlining:

    - First it checks the GPU target's rule that host code (outside the
      launches) reads and writes no buffer, since buffers hold device
      pointers there; an op that does is an error, where a GPU would fault.
    - Each `gpu.launch` becomes six nested `scf.for` loops, over the z, y, x
      blocks and then the z, y, x threads, around the kernel body; the
      body's block and thread ids and sizes (its region arguments, or
      `gpu.block_id` and friends) become the loops' induction variables and
      bounds. Threads run one after another.
    - A kernel whose threads cooperate (the tensor-core route's: barriers,
      dynamic shared memory, `nvgpu.ldmatrix`, `nvvm.mma.sync` /
      `nvgpu.mma.sync` m16n8k16 on bf16 or f16, `gpu.shuffle`) has its
      threads serialised first (ThreadSerialization.cpp, the barrier
      elimination of CPU back ends for SPMD code): each stretch between
      barriers becomes a loop over the block's threads, a value kept across
      a barrier a buffer with one element per thread (where the block size
      is a constant, all of a launch's such buffers are views of one 64-byte
      aligned allocation, made at the top of the kernel: one malloc per
      launch, and one argument of the outlined loops), shared memory a host
      buffer (starting 16 bytes past a 1024-byte boundary: the alignment
      the GPU target's declaration promises, no more), and ldmatrix and
      mma.sync an exchange between two barriers in
      which each lane computes its share from its warp's values as the PTX
      ISA defines the fragments (independently of the maps the tensor-core
      pass takes from upstream, which running its kernels therefore
      checks). A `gpu.shuffle` is
      emulated in the butterfly form (`xor`, width 32, a constant offset),
      also as an exchange between two barriers: lane `l` reads lane
      `l ^ offset` of its warp. Barriers must be at the top of the kernel,
      of `scf.for` loops whose bounds all threads share or of `scf.if`
      branches without results on a condition all threads share (a merged
      launch's bodies, chosen by the block index), blocks
      one-dimensional (and a multiple of 32 threads where warps exchange
      values). A memory fence (`nvvm.memory.barrier`: split-K's count of
      finished parts) is dropped, since every access already happens one
      after another. Other shuffle modes and widths, clusters, workgroup
      attributions and other NVVM or nvgpu ops are errors.
    - Before that, sm_90a's asynchronous ops (the wgmma route's) become
      plain loads, stores and loops, as the PTX ISA defines them
      (HopperOps.cpp): `nvgpu.tma.async.load` copies its box from the
      tensor that the host's `nvgpu.tma.create.descriptor` names (zero or
      NaN outside it) into dynamic shared memory in the descriptor's
      swizzled layout, and completes its bytes on its mbarrier; an
      mbarrier group is a host buffer of four i64 per barrier (arrival
      count, pending arrivals, pending transaction bytes, phase) that
      `init`, `arrive`, `arrive.expect_tx` and the loads update, and
      `try_wait.parity` asserts that the phase it waits for has completed
      and that no byte arrived past it (else the run aborts with a
      message: on a GPU the kernel would hang or race);
      `nvgpu.warpgroup.mma` (A K-major, B N-major, in 128/64/32-byte
      swizzled shared memory at the addresses its descriptors encode, each
      tile at a multiple of 8 swizzle spans of the address, as their base
      offset of 0 requires, else the run aborts) and
      the accumulators' init and store run once per warpgroup of 128
      threads, between two barriers, on a host buffer of each warpgroup's
      M x N accumulators, which the loops no longer carry. The descriptors
      themselves are erased.
    - `gpu.alloc` / `gpu.dealloc` / `gpu.memcpy` become `memref.alloc`
      (64-byte aligned) / `memref.dealloc` / `memref.copy`; a synchronous
      `gpu.wait` is dropped. Asynchronous forms are errors.

    Before:

    ```mlir
    %buf = gpu.alloc () : memref<100xf32>
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c100, %sy = %c1, %sz = %c1) {
      memref.store %cst, %buf[%tx] : memref<100xf32>
      gpu.terminator
    }
    ```

    After (abridged):

    ```mlir
    %buf = memref.alloc() {alignment = 64 : i64} : memref<100xf32>
    scf.for %bz = %c0 to %c1 step %c1 {
      ... scf.for %tx = %c0 to %c100 step %c1 {
        memref.store %cst, %buf[%tx] : memref<100xf32>
      } ...
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"
  ];
}

#endif // SWITCHYARD_LIB_CODEGEN_EMULATION_PASSES_TD

//===- GpuLaunchToHostLoops.cpp - GPU kernels run on the host -------------===//
//
// Implements `switchyard-gpu-launch-to-host-loops`, the GPU emulation's
// step: the kernels that the GPU target formed (gpu.launch, before
// outlining) run on the host CPU as loops over their blocks and threads, and
// device memory becomes host memory. First it checks the GPU target's rule
// that host code touches no buffer, which a GPU would enforce with a fault.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/HostCode.h"
#include "lib/Codegen/Emulation/HopperOps.h"
#include "lib/Codegen/Emulation/Passes.h"
#include "lib/Codegen/Emulation/ThreadSerialization.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPULAUNCHTOHOSTLOOPSPASS
#include "lib/Codegen/Emulation/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-launch-to-host-loops"

using namespace mlir;

namespace {
/// The launch's kernel name for diagnostics: @module::@function where the
/// launch names them (switchyard-gpu-name-kernels), else "a kernel".
std::string kernelName(gpu::LaunchOp launch) {
  if (!launch.getFunction())
    return "a kernel";
  return ("@" + launch.getModule().value_or("?") + "::@" +
          launch.getFunction().value_or("?"))
      .str();
}

/// Whether the host emulation can run `launch`; emits why not. Threads run
/// one after another; where they cooperate, through barriers, dynamic
/// shared memory, the tensor-core route's ldmatrix and mma.sync, and
/// butterfly (xor, width 32) shuffles, in the forms serializeThreads
/// handles; the wgmma route's TMA loads, mbarriers and warpgroup MMAs in the
/// forms emulateHopperOps handles. Other ops that depend on the GPU's
/// hardware (other NVVM and nvgpu ops) are refused.
LogicalResult checkEmulable(gpu::LaunchOp launch) {
  auto refuse = [&](Operation *at, const Twine &what) {
    return at->emitOpError()
           << "in " << kernelName(launch) << ": " << what
           << "; the GPU emulation runs the SIMT route "
              "and the tensor-core routes (bf16 or f16: mma.sync, and wgmma "
              "with TMA)";
  };
  if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty())
    return refuse(launch, "asynchronous launches are not emulated");
  if (launch.hasClusterSize())
    return refuse(launch, "thread-block clusters are not emulated");
  if (!launch.getWorkgroupAttributions().empty())
    return refuse(launch, "workgroup memory attributions are not emulated");
  if (!launch.getPrivateAttributions().empty())
    return refuse(launch, "private memory attributions are not emulated");
  if (!launch.getBody().hasOneBlock())
    return refuse(launch, "a kernel body of several blocks is not emulated");
  WalkResult walk = launch.getBody().walk([&](Operation *op) {
    StringRef dialect = op->getDialect() ? op->getDialect()->getNamespace()
                                         : StringRef();
    bool indexQuery = isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp,
                          gpu::GridDimOp>(op);
    if (switchyard::needsSerializedThreads(op) || isa<NVVM::MembarOp>(op) ||
        switchyard::isHopperOp(op))
      return WalkResult::advance();
    if ((dialect == "gpu" && !indexQuery && !isa<gpu::TerminatorOp>(op)) ||
        dialect == "nvgpu" || dialect == "nvvm") {
      (void)refuse(op, "this op depends on the GPU");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted() || failed(switchyard::checkHopperOps(launch)))
    return failure();
  if (switchyard::needsSerializedThreads(launch))
    return switchyard::checkSerializable(launch);
  return success();
}

/// `dimension`'s component of `values`.
Value component(const gpu::KernelDim3 &values, gpu::Dimension dimension) {
  switch (dimension) {
  case gpu::Dimension::x:
    return values.x;
  case gpu::Dimension::y:
    return values.y;
  case gpu::Dimension::z:
    return values.z;
  }
  llvm_unreachable("a dimension is x, y or z");
}

/// Replaces `launch` with the loop nest over its blocks and threads (z, y, x
/// blocks outermost, then z, y, x threads) around its body. Threads that
/// cooperate are first serialised between barriers (serializeThreads), and
/// the body then runs once per block.
LogicalResult emulate(gpu::LaunchOp launch, IRRewriter &rewriter) {
  Location loc = launch.getLoc();
  bool serialized = switchyard::needsSerializedThreads(launch);
  LLVM_DEBUG(llvm::dbgs() << "emulating " << kernelName(launch) << " at " << loc
                          << " as host loops"
                          << (serialized ? ", threads serialised between "
                                           "barriers"
                                         : "")
                          << "\n");
  // A memory fence orders a thread's accesses for the others; here every
  // access of every thread and block happens one after another anyway.
  SmallVector<NVVM::MembarOp> fences;
  launch.getBody().walk([&](NVVM::MembarOp fence) { fences.push_back(fence); });
  for (NVVM::MembarOp fence : fences)
    rewriter.eraseOp(fence);
  bool hopper = launch.getBody()
                    .walk([](Operation *op) {
                      return switchyard::isHopperOp(op)
                                 ? WalkResult::interrupt()
                                 : WalkResult::advance();
                    })
                    .wasInterrupted();
  if (hopper && failed(switchyard::emulateHopperOps(launch, rewriter)))
    return failure();
  if (serialized && failed(switchyard::serializeThreads(launch, rewriter)))
    return failure();
  rewriter.setInsertionPoint(launch);
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  SmallVector<Value> upper = {grid.z, grid.y, grid.x};
  if (serialized)
    upper.append(3, one);
  else
    upper.append({block.z, block.y, block.x});
  scf::LoopNest nest = scf::buildLoopNest(
      rewriter, loc, SmallVector<Value>(6, zero), upper,
      SmallVector<Value>(6, one));
  auto iv = [&](int i) { return nest.loops[i].getInductionVar(); };
  gpu::KernelDim3 blockIds{iv(2), iv(1), iv(0)};
  gpu::KernelDim3 threadIds{iv(5), iv(4), iv(3)};

  // The body's arguments: the block and thread ids, then the grid and block
  // sizes (gpu.launch's region signature).
  Block &body = launch.getBody().front();
  IRMapping sizes;
  auto mapAll = [&](gpu::KernelDim3 from, gpu::KernelDim3 to) {
    sizes.map(from.x, to.x);
    sizes.map(from.y, to.y);
    sizes.map(from.z, to.z);
  };
  mapAll(launch.getBlockIds(), blockIds);
  mapAll(launch.getThreadIds(), threadIds);
  mapAll(launch.getGridSize(), grid);
  mapAll(launch.getBlockSize(), block);
  SmallVector<Value> arguments;
  for (BlockArgument argument : body.getArguments())
    arguments.push_back(sizes.lookup(argument));

  Block *innermost = nest.loops.back().getBody();
  Operation *yield = innermost->getTerminator();
  rewriter.inlineBlockBefore(&body, yield, arguments);
  // The kernel's own index queries, where it makes them.
  SmallVector<Operation *> queries;
  innermost->walk([&](Operation *op) {
    if (isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp,
            gpu::TerminatorOp>(op))
      queries.push_back(op);
  });
  for (Operation *op : queries) {
    rewriter.setInsertionPoint(op);
    Value value;
    if (auto q = dyn_cast<gpu::ThreadIdOp>(op))
      value = component(threadIds, q.getDimension());
    else if (auto q = dyn_cast<gpu::BlockIdOp>(op))
      value = component(blockIds, q.getDimension());
    else if (auto q = dyn_cast<gpu::BlockDimOp>(op))
      value = component(block, q.getDimension());
    else if (auto q = dyn_cast<gpu::GridDimOp>(op))
      value = component(grid, q.getDimension());
    if (value)
      rewriter.replaceOp(op, value);
    else
      rewriter.eraseOp(op); // gpu.terminator
  }
  rewriter.eraseOp(launch);
  return success();
}

/// Device memory to host memory: allocations, frees, copies and sets.
LogicalResult toHostMemory(Operation *op, IRRewriter &rewriter) {
  if (auto async = dyn_cast<gpu::AsyncOpInterface>(op);
      async && async.getAsyncToken())
    return op->emitOpError() << "is not emulated (asynchronous)";
  rewriter.setInsertionPoint(op);
  if (auto alloc = dyn_cast<gpu::AllocOp>(op)) {
    if (alloc.getHostShared())
      return alloc.emitOpError() << "is not emulated (host-shared)";
    // cuMemAlloc aligns to 256 bytes; the CPU's vector code wants 64.
    rewriter.replaceOpWithNewOp<memref::AllocOp>(
        alloc, alloc.getType(), alloc.getDynamicSizes(),
        alloc.getSymbolOperands(), rewriter.getI64IntegerAttr(64));
  } else if (auto dealloc = dyn_cast<gpu::DeallocOp>(op)) {
    rewriter.replaceOpWithNewOp<memref::DeallocOp>(dealloc,
                                                   dealloc.getMemref());
  } else if (auto copy = dyn_cast<gpu::MemcpyOp>(op)) {
    rewriter.replaceOpWithNewOp<memref::CopyOp>(copy, copy.getSrc(),
                                                copy.getDst());
  } else if (auto memset = dyn_cast<gpu::MemsetOp>(op)) {
    // Every element set, in loops over the buffer's extents.
    Value buffer = memset.getDst();
    auto type = cast<MemRefType>(buffer.getType());
    Location loc = memset.getLoc();
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    SmallVector<Value> indices;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      Value extent = memref::DimOp::create(rewriter, loc, buffer, d);
      auto loop = scf::ForOp::create(rewriter, loc, zero, extent, one);
      indices.push_back(loop.getInductionVar());
      rewriter.setInsertionPoint(loop.getBody()->getTerminator());
    }
    memref::StoreOp::create(rewriter, loc, memset.getValue(), buffer, indices);
    rewriter.eraseOp(memset);
  } else if (isa<gpu::WaitOp>(op)) {
    rewriter.eraseOp(op);
  } else {
    return op->emitOpError() << "in host code is not emulated";
  }
  return success();
}

struct SwitchyardGpuLaunchToHostLoopsPass
    : public switchyard::impl::SwitchyardGpuLaunchToHostLoopsPassBase<
          SwitchyardGpuLaunchToHostLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<gpu::LaunchOp> launches;
    SmallVector<Operation *> hostMemoryOps;
    bool failed = false;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
        launches.push_back(launch);
        failed |= mlir::failed(checkEmulable(launch));
        return WalkResult::skip();
      }
      if (isa_and_nonnull<gpu::GPUDialect>(op->getDialect())) {
        hostMemoryOps.push_back(op);
        return WalkResult::advance();
      }
      // The GPU target's host code only passes buffers around: it would
      // fault on a device pointer. (A TMA descriptor names a buffer; the
      // emulated kernels read the buffer itself.)
      if (!isa<CallOpInterface, nvgpu::TmaCreateDescriptorOp>(op) &&
          !op->hasTrait<OpTrait::IsTerminator>() &&
          switchyard::readsOrWritesMemory(op)) {
        op->emitOpError()
            << "reads or writes a buffer in host code, which holds device "
               "pointers on the GPU target (switchyard-gpu-launch-host-"
               "compute should have moved it into a kernel)";
        failed = true;
      }
      return WalkResult::advance();
    });
    if (failed)
      return signalPassFailure();

    IRRewriter rewriter(&getContext());
    for (Operation *op : hostMemoryOps)
      if (mlir::failed(toHostMemory(op, rewriter)))
        return signalPassFailure();
    for (gpu::LaunchOp launch : launches)
      if (mlir::failed(emulate(launch, rewriter)))
        return signalPassFailure();
    switchyard::eraseUnusedTmaDescriptors(func, rewriter);
  }
};
} // namespace

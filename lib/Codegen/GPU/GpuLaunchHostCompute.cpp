//===- GpuLaunchHostCompute.cpp - host memory accesses into kernels -------===//
//
// Implements `switchyard-gpu-launch-host-compute`. After the parallel loops
// became kernels, whatever host code still reads or writes a buffer (scalar
// loads of a loss or of hyper-parameters, 0-d linalg ops, reduction-only
// loop nests) cannot stay on the host: buffers live in device memory. Runs
// of such ops become single-thread kernels, and the scalars they compute
// reach later kernels through 0-d device buffers.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/HostCode.h"
#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPULAUNCHHOSTCOMPUTEPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-launch-host-compute"

using namespace mlir;
using mlir::switchyard::readsOrWritesMemory;
using mlir::switchyard::viewedBuffer;

namespace {
/// Ops that only the host can execute.
bool isHostOnly(Operation *op) {
  return isa<gpu::LaunchOp, gpu::AllocOp, gpu::DeallocOp, gpu::MemcpyOp,
             gpu::MemsetOp, gpu::WaitOp, gpu::LaunchFuncOp, CallOpInterface>(
             op) ||
         op->hasTrait<OpTrait::IsTerminator>();
}

/// Whether `op` calls a function of its module that has a body (rather
/// than a declaration, whose memory accesses are unknown).
bool callsFunctionWithBody(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  if (!call)
    return false;
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      call, call.getCalleeAttr());
  return callee && !callee.isDeclaration();
}

/// Whether host code may move past `op` without changing memory order: it
/// has no effects, or only allocates.
bool commutesWithDeviceCode(Operation *op) {
  if (isa<gpu::LaunchOp>(op))
    return false;
  if (isMemoryEffectFree(op))
    return true;
  if (auto iface = dyn_cast<MemoryEffectOpInterface>(op)) {
    SmallVector<MemoryEffects::EffectInstance> effects;
    iface.getEffects(effects);
    return llvm::all_of(effects, [](const MemoryEffects::EffectInstance &e) {
      return isa<MemoryEffects::Allocate>(e.getEffect());
    });
  }
  return false;
}

/// Kernel parameter space limit of PTX before ISA 8.1 (4352 bytes), less a
/// margin.
constexpr int64_t kMaxKernelParamBytes = 4096;

/// The bytes of kernel parameters that passing `value` costs: a memref
/// descriptor (two pointers, offset, sizes, strides), or a scalar, which a
/// 0-d buffer's descriptor carries when `value` is computed on the device.
int64_t kernelParamBytes(Value value, const llvm::DenseSet<Operation *> &device,
                         Block &block) {
  if (auto memref = dyn_cast<MemRefType>(value.getType()))
    return 8 * (3 + 2 * memref.getRank());
  Operation *def = value.getDefiningOp();
  if (def && device.contains(block.findAncestorOpInBlock(*def)))
    return 8 * 3;
  return 8;
}

/// The longest chain of a scalar read and its arithmetic that kernels
/// compute again instead of a single-thread kernel passing it on.
constexpr size_t kMaxRecomputedOps = 32;

/// Clones each scalar read of `block` that only kernels use, with the
/// arithmetic on it, into every kernel that uses it (each thread computes
/// it again: the dropout's key from its seed), where no op between the read
/// and the kernel may write the buffer read. The rest of the pass then
/// finds nothing to run in a kernel of its own for it.
void recomputeScalarReadsInKernels(Block &block) {
  SmallVector<memref::LoadOp> loads;
  for (Operation &op : block)
    if (auto load = dyn_cast<memref::LoadOp>(op))
      loads.push_back(load);
  for (memref::LoadOp load : loads) {
    // The read and the host ops that compute on it, transitively; every
    // other use must be in a kernel's body.
    llvm::SetVector<Operation *> chain;
    llvm::SetVector<gpu::LaunchOp> kernels;
    chain.insert(load);
    bool onlyKernels = true;
    for (size_t i = 0; i < chain.size() && onlyKernels; ++i) {
      for (Value result : chain[i]->getResults()) {
        for (Operation *user : result.getUsers()) {
          Operation *top = block.findAncestorOpInBlock(*user);
          auto kernel = dyn_cast_or_null<gpu::LaunchOp>(top);
          if (kernel && kernel != user) {
            kernels.insert(kernel);
          } else if (user == top && isMemoryEffectFree(user) &&
                     user->getNumRegions() == 0 &&
                     !user->hasTrait<OpTrait::IsTerminator>()) {
            chain.insert(user);
          } else {
            onlyKernels = false;
          }
        }
      }
    }
    if (!onlyKernels || kernels.empty() || chain.size() > kMaxRecomputedOps)
      continue;
    // In program order: the clones' operands before them.
    SmallVector<Operation *> ordered(chain.begin(), chain.end());
    llvm::sort(ordered, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    // Memory order: nothing between the read and a kernel writes the buffer.
    Value buffer = viewedBuffer(load.getMemref());
    auto writesBuffer = [&](Operation *op) {
      return op
          ->walk([&](Operation *nested) {
            return switchyard::accessesBuffer(
                       nested, /*writesOnly=*/true,
                       [&](Value v) {
                         Value root = viewedBuffer(v);
                         return !switchyard::isOwnMemory(root, op) &&
                                switchyard::mayAlias(root, buffer);
                       })
                       ? WalkResult::interrupt()
                       : WalkResult::advance();
          })
          .wasInterrupted();
    };
    // And the whole chain comes before each kernel (the clones' operands
    // are then all defined there).
    bool unchanged = true;
    for (gpu::LaunchOp kernel : kernels) {
      for (Operation *op : chain)
        unchanged &= op->isBeforeInBlock(kernel);
      for (Operation *op = load->getNextNode();
           unchanged && op && op != kernel.getOperation(); op = op->getNextNode())
        unchanged &= chain.contains(op) || !writesBuffer(op);
    }
    if (!unchanged)
      continue;
    LLVM_DEBUG(llvm::dbgs() << "recomputing a scalar read (" << chain.size()
                            << " ops) in " << kernels.size() << " kernels\n");
    OpBuilder b(load.getContext());
    for (gpu::LaunchOp kernel : kernels) {
      b.setInsertionPointToStart(&kernel.getBody().front());
      IRMapping map;
      for (Operation *op : ordered)
        b.clone(*op, map);
      for (Operation *op : ordered)
        for (Value result : op->getResults())
          result.replaceUsesWithIf(map.lookup(result), [&](OpOperand &use) {
            return kernel->isProperAncestor(use.getOwner());
          });
    }
    for (Operation *op : llvm::reverse(ordered))
      op->erase();
  }
}

struct SwitchyardGpuLaunchHostComputePass
    : public switchyard::impl::SwitchyardGpuLaunchHostComputePassBase<
          SwitchyardGpuLaunchHostComputePass> {
  using Base::Base;

  void runOnOperation() override {
    for (Block &block : getOperation().getBody())
      if (failed(processBlock(block)))
        return signalPassFailure();
  }

  /// Finds the ops of `block` that must run on the device, groups them into
  /// runs and turns each run into a single-thread launch.
  LogicalResult processBlock(Block &block) {
    recomputeScalarReadsInKernels(block);
    // Ops that touch buffers, or use a value computed by such an op.
    llvm::DenseSet<Operation *> device;
    auto usesDeviceValue = [&](Operation *op) {
      auto isDevice = [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && device.contains(block.findAncestorOpInBlock(*def));
      };
      if (isa<gpu::LaunchOp>(op)) // Its body loads what it needs.
        return llvm::any_of(op->getOperands(), isDevice);
      WalkResult walk = op->walk([&](Operation *nested) {
        return llvm::any_of(nested->getOperands(), isDevice)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      });
      return walk.wasInterrupted();
    };
    for (Operation &op : block) {
      if (isa<scf::ParallelOp>(op))
        return op.emitOpError() << "was not mapped to blocks and threads; run "
                                   "convert-parallel-loops-to-gpu first";
      // Kernel bodies run on the device already; a function of the module
      // that this op calls gets its own kernels (this pass runs on it too),
      // so the call only passes buffers on.
      bool touches = op.walk<WalkOrder::PreOrder>([](Operation *nested) {
                         if (isa<gpu::LaunchOp>(nested) ||
                             callsFunctionWithBody(nested))
                           return WalkResult::skip();
                         return readsOrWritesMemory(nested)
                                    ? WalkResult::interrupt()
                                    : WalkResult::advance();
                       }).wasInterrupted();
      if (!touches && !usesDeviceValue(&op))
        continue;
      if (isHostOnly(&op))
        return op.emitOpError()
               << "runs on the host but needs a value that only the device "
                  "can compute or read (buffers live in device memory)";
      if (op.walk([](gpu::LaunchOp) {
              return WalkResult::interrupt();
            }).wasInterrupted())
        return op.emitOpError()
               << "mixes host-side buffer accesses with kernel launches";
      device.insert(&op);
    }
    if (device.empty())
      return success();

    // Runs of device ops; a host op with memory effects ends a run, so that
    // the launch keeps its place in the memory order. A run also ends before
    // its kernel's parameters would outgrow what every PTX version accepts.
    SmallVector<SmallVector<Operation *>> runs(1);
    llvm::SmallPtrSet<Operation *, 16> inRun;
    llvm::DenseSet<Value> captured;
    int64_t paramBytes = 0;
    auto startRun = [&] {
      if (runs.back().empty())
        return;
      runs.emplace_back();
      inRun.clear();
      captured.clear();
      paramBytes = 0;
    };
    // The kernel parameters `op` would add to the current run.
    auto newParams = [&](Operation &op) {
      llvm::SetVector<Value> external;
      op.walk([&](Operation *nested) {
        for (Value v : nested->getOperands()) {
          if (op.isAncestor(v.getParentBlock()->getParentOp()) ||
              captured.contains(v))
            continue;
          if (Operation *def = v.getDefiningOp())
            if (def->hasTrait<OpTrait::ConstantLike>() ||
                inRun.contains(block.findAncestorOpInBlock(*def)))
              continue; // Sunk into the kernel, or computed there.
          external.insert(v);
        }
      });
      return external;
    };
    for (Operation &op : block) {
      if (!device.contains(&op)) {
        if (!commutesWithDeviceCode(&op))
          startRun();
        continue;
      }
      // Each result that may escape the run costs a 0-d buffer parameter.
      int64_t escapingBytes = 0;
      for (Value result : op.getResults())
        if (!result.use_empty())
          escapingBytes += 8 * 3;
      llvm::SetVector<Value> external = newParams(op);
      int64_t bytes = paramBytes + escapingBytes;
      for (Value v : external)
        bytes += kernelParamBytes(v, device, block);
      if (bytes > kMaxKernelParamBytes && !runs.back().empty()) {
        startRun();
        external = newParams(op);
        bytes = escapingBytes;
        for (Value v : external)
          bytes += kernelParamBytes(v, device, block);
      }
      runs.back().push_back(&op);
      inRun.insert(&op);
      captured.insert(external.begin(), external.end());
      paramBytes = bytes;
    }
    if (runs.back().empty())
      runs.pop_back();
    LLVM_DEBUG(llvm::dbgs()
               << device.size() << " host ops must run on the device: "
               << runs.size() << " single-thread kernels\n");
    llvm::DenseMap<Operation *, unsigned> runOf;
    for (auto [index, run] : llvm::enumerate(runs))
      for (Operation *op : run)
        runOf[op] = index;

    IRRewriter rewriter(&getContext());
    SmallVector<Value> scalarBuffers;
    for (unsigned index = 0; index < runs.size(); ++index) {
      SmallVector<Operation *> &run = runs[index];
      llvm::SmallPtrSet<Operation *, 16> members(run.begin(), run.end());
      Location loc = run.back()->getLoc();

      // Values of the run that later code uses; each gets a 0-d buffer.
      SmallVector<Value> escaping;
      for (Operation *op : run)
        for (Value result : op->getResults())
          if (llvm::any_of(result.getUsers(), [&](Operation *user) {
                return !members.contains(block.findAncestorOpInBlock(*user));
              }))
            escaping.push_back(result);
      LLVM_DEBUG(llvm::dbgs() << "  kernel " << index << " at " << loc << ": "
                              << run.size() << " ops, " << escaping.size()
                              << " scalars passed on in 0-d buffers\n");

      rewriter.setInsertionPointAfter(run.back());
      Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
      SmallVector<Value> buffers;
      for (Value value : escaping) {
        Type type = value.getType();
        if (!type.isIntOrIndexOrFloat())
          return value.getDefiningOp()->emitOpError()
                 << "computes a " << type
                 << " on the device that the host would need; only scalars "
                    "can be passed on";
        Value buffer = gpu::AllocOp::create(
                           rewriter, loc, MemRefType::get({}, type),
                           /*asyncToken=*/Type(), ValueRange(), ValueRange(),
                           ValueRange(), /*hostShared=*/false)
                           .getMemref();
        buffers.push_back(buffer);
        scalarBuffers.push_back(buffer);
      }
      auto launch =
          gpu::LaunchOp::create(rewriter, loc, one, one, one, one, one, one);
      Block &body = launch.getBody().front();
      if (body.empty() || !body.back().hasTrait<OpTrait::IsTerminator>()) {
        rewriter.setInsertionPointToEnd(&body);
        gpu::TerminatorOp::create(rewriter, loc);
      }

      // Later users read the scalars back: at the start of each kernel, or
      // just before the op of a later run.
      for (auto [value, buffer] : llvm::zip(escaping, buffers)) {
        llvm::DenseMap<Operation *, Value> loaded;
        for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
          Operation *user = use.getOwner();
          Operation *top = block.findAncestorOpInBlock(*user);
          if (members.contains(top))
            continue;
          Operation *anchor = nullptr;
          if (auto kernel = user->getParentOfType<gpu::LaunchOp>())
            anchor = &kernel.getBody().front().front();
          else if (runOf.contains(top) && runOf[top] > index)
            anchor = top;
          else
            return user->emitOpError()
                   << "uses a value computed on the device but cannot run "
                      "there";
          Value &load = loaded[anchor];
          if (!load) {
            rewriter.setInsertionPoint(anchor);
            Operation *loadOp =
                memref::LoadOp::create(rewriter, loc, buffer, ValueRange());
            load = loadOp->getResult(0);
            if (anchor == top) {
              // The load belongs to that later run, before its user.
              SmallVector<Operation *> &later = runs[runOf[top]];
              later.insert(llvm::find(later, top), loadOp);
              runOf[loadOp] = runOf[top];
            }
          }
          use.set(load);
        }
      }

      // The run itself, then the stores of what escapes.
      Operation *terminator = body.getTerminator();
      for (Operation *op : run)
        op->moveBefore(terminator);
      rewriter.setInsertionPoint(terminator);
      for (auto [value, buffer] : llvm::zip(escaping, buffers))
        memref::StoreOp::create(rewriter, loc, value, buffer, ValueRange());
    }

    // The scalar buffers live until the function returns.
    if (!scalarBuffers.empty()) {
      if (block.empty() || !block.back().hasTrait<OpTrait::IsTerminator>())
        return getOperation().emitOpError() << "has a block without terminator";
      rewriter.setInsertionPoint(block.getTerminator());
      for (Value buffer : scalarBuffers)
        gpu::DeallocOp::create(rewriter, buffer.getLoc(), /*asyncToken=*/Type(),
                               ValueRange(), buffer);
    }
    return success();
  }
};
} // namespace

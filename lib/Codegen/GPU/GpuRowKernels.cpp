//===- GpuRowKernels.cpp - a thread block per row --------------------------===//
//
// Implements `switchyard-gpu-row-kernels` (see Passes.td): the loops over
// rows that switchyard-fuse-rows forms become kernels with a thread block
// per row, the ops of a row sharing its elements among the block's
// threads.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/GPU/Passes.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUROWKERNELSPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-row-kernels"

using namespace mlir;

namespace {

/// The shared memory a row kernel may take: what every CUDA GPU offers a
/// block without opting in.
constexpr int64_t kMaxSharedBytes = 48 * 1024;

/// Whether `forall` is a loop over rows: mapped to thread blocks by linear
/// dimension.
bool isRowLoop(scf::ForallOp forall) {
  std::optional<ArrayAttr> mapping = forall.getMapping();
  return mapping && !mapping->empty() &&
         llvm::all_of(*mapping, [](Attribute attr) {
           auto block = dyn_cast<gpu::GPUBlockMappingAttr>(attr);
           return block && block.isLinearMapping();
         });
}

/// A reduction to one value whose body combines the previous value with
/// one new term: the combining op, or null.
Operation *singleCombiner(linalg::GenericOp op) {
  if (op.getNumParallelLoops() != 0 || op.getNumDpsInits() != 1 ||
      !isa<MemRefType>(op.getDpsInitOperand(0)->get().getType()))
    return nullptr;
  auto outType = cast<MemRefType>(op.getDpsInitOperand(0)->get().getType());
  if (outType.getRank() != 0 || !outType.getElementType().isF32())
    return nullptr;
  BlockArgument out = op.getRegionOutputArgs()[0];
  Operation *combiner =
      cast<linalg::YieldOp>(op.getBody()->getTerminator()).getOperand(0)
          .getDefiningOp();
  if (!combiner || !isa<arith::AddFOp, arith::MaximumFOp, arith::MaxNumFOp>(
                       combiner))
    return nullptr;
  if (!out.hasOneUse() || out.getUses().begin()->getOwner() != combiner ||
      combiner->getOperand(0) == combiner->getOperand(1))
    return nullptr;
  return combiner;
}

/// The value that `combiner` leaves unchanged.
Value identityOf(OpBuilder &b, Location loc, Operation *combiner) {
  float value = isa<arith::AddFOp>(combiner)
                    ? 0.0f
                    : -std::numeric_limits<float>::infinity();
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

/// Emits the ops of one row in a kernel whose `threads` threads share it.
struct RowEmitter {
  OpBuilder &b;
  Location loc;
  Value tid;
  int64_t threads;
  /// Shared memory for one f32 partial result per thread.
  Value partials;

  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  /// `linear` as indices of loops of sizes `sizes` (the last fastest).
  SmallVector<Value> delinearize(Value linear, ArrayRef<Value> sizes) {
    SmallVector<Value> indices(sizes.size());
    for (int64_t i = int64_t(sizes.size()) - 1; i >= 0; --i) {
      if (i == 0) {
        indices[i] = linear;
        break;
      }
      indices[i] = arith::RemUIOp::create(b, loc, linear, sizes[i]);
      linear = arith::DivUIOp::create(b, loc, linear, sizes[i]);
    }
    return indices;
  }

  Value product(ArrayRef<Value> sizes) {
    Value p = cst(1);
    for (Value size : sizes)
      p = arith::MulIOp::create(b, loc, p, size);
    return p;
  }

  SmallVector<Value> access(AffineMap map, ValueRange loops) {
    return llvm::map_to_vector(map.getResults(), [&](AffineExpr expr) {
      return affine::expandAffineExpr(b, loc, expr, loops, ValueRange{});
    });
  }

  /// The body of `op` at the loop indices `loops`, its operands loaded
  /// where the body reads them; `skip` (if any) is left out. Returns the
  /// mapping of the body's values.
  IRMapping body(linalg::GenericOp op, ValueRange loops, Operation *skip) {
    IRMapping map;
    for (OpOperand &operand : op->getOpOperands()) {
      BlockArgument arg = op.getMatchingBlockArgument(&operand);
      // With the combiner left out, the body does not read the output.
      if (arg.use_empty() || (skip && op.isDpsInit(&operand)))
        continue;
      if (!isa<MemRefType>(operand.get().getType())) {
        map.map(arg, operand.get()); // a scalar operand, as a fill's value
        continue;
      }
      map.map(arg, memref::LoadOp::create(
                       b, loc, operand.get(),
                       access(op.getMatchingIndexingMap(&operand), loops)));
    }
    for (Operation &inner : op.getBody()->without_terminator())
      if (&inner != skip)
        b.clone(inner, map);
    return map;
  }

  void storeResults(linalg::GenericOp op, ValueRange loops,
                    const IRMapping &map) {
    auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
    for (auto [value, init] :
         llvm::zip(yield.getOperands(), op.getDpsInitsMutable()))
      memref::StoreOp::create(
          b, loc, map.lookupOrDefault(value), init.get(),
          access(op.getMatchingIndexingMap(&init), loops));
  }

  /// Thread `tid` computes the parallel iterations `tid`, `tid + threads`,
  /// ..., each with its reduction loops in order.
  void emitStrided(linalg::GenericOp op) {
    SmallVector<Range, 4> ranges =
        cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(b, loc);
    SmallVector<Value> parallelSizes, reductionSizes;
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    for (auto [range, iterator] : llvm::zip(ranges, iterators)) {
      Value size = getValueOrCreateConstantIndexOp(b, loc, range.size);
      (iterator == utils::IteratorType::parallel ? parallelSizes
                                                 : reductionSizes)
          .push_back(size);
    }
    auto outer = scf::ForOp::create(b, loc, tid, product(parallelSizes),
                                    cst(threads));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(outer.getBody()->getTerminator());
    SmallVector<Value> parallel =
        delinearize(outer.getInductionVar(), parallelSizes);
    SmallVector<Value> reduction;
    if (!reductionSizes.empty()) {
      auto inner = scf::ForOp::create(b, loc, cst(0), product(reductionSizes),
                                      cst(1));
      b.setInsertionPoint(inner.getBody()->getTerminator());
      reduction = delinearize(inner.getInductionVar(), reductionSizes);
    }
    SmallVector<Value> loops;
    auto nextParallel = parallel.begin(), nextReduction = reduction.begin();
    for (utils::IteratorType iterator : iterators)
      loops.push_back(iterator == utils::IteratorType::parallel
                          ? *nextParallel++
                          : *nextReduction++);
    IRMapping map = body(op, loops, /*skip=*/nullptr);
    storeResults(op, loops, map);
  }

  /// Each thread combines its strided share of the terms; thread 0 combines
  /// the partial results, in thread order, with the initial value.
  void emitBlockReduction(linalg::GenericOp op, Operation *combiner) {
    SmallVector<Range, 4> ranges =
        cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(b, loc);
    SmallVector<Value> sizes = llvm::map_to_vector(ranges, [&](Range r) {
      return getValueOrCreateConstantIndexOp(b, loc, r.size);
    });
    BlockArgument out = op.getRegionOutputArgs()[0];
    Value term = combiner->getOperand(0) == out ? combiner->getOperand(1)
                                                : combiner->getOperand(0);
    auto combine = [&](Value acc, Value value) {
      IRMapping map;
      map.map(out, acc);
      map.map(term, value);
      return b.clone(*combiner, map)->getResult(0);
    };

    auto strided = scf::ForOp::create(
        b, loc, tid, product(sizes), cst(threads),
        ValueRange{identityOf(b, loc, combiner)},
        [&](OpBuilder &, Location, Value iv, ValueRange acc) {
          IRMapping map = body(op, delinearize(iv, sizes), combiner);
          scf::YieldOp::create(
              b, loc, combine(acc[0], map.lookupOrDefault(term)));
        });
    memref::StoreOp::create(b, loc, strided.getResult(0), partials, tid);
    gpu::BarrierOp::create(b, loc);
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                        cst(0));
    scf::IfOp::create(b, loc, first, [&](OpBuilder &, Location) {
      Value init = op.getDpsInitOperand(0)->get();
      Value start = memref::LoadOp::create(b, loc, init, ValueRange{});
      auto all = scf::ForOp::create(
          b, loc, cst(0), cst(threads), cst(1), ValueRange{start},
          [&](OpBuilder &, Location, Value t, ValueRange acc) {
            Value partial = memref::LoadOp::create(b, loc, partials, t);
            scf::YieldOp::create(b, loc, combine(acc[0], partial));
          });
      memref::StoreOp::create(b, loc, all.getResult(0), init, ValueRange{});
      scf::YieldOp::create(b, loc);
    });
  }
};

struct SwitchyardGpuRowKernelsPass
    : public switchyard::impl::SwitchyardGpuRowKernelsPassBase<
          SwitchyardGpuRowKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < 1 || blockSize > 1024) {
      emitError(getOperation().getLoc())
          << "switchyard-gpu-row-kernels: block-size must be in [1, 1024], "
             "found "
          << int64_t(blockSize);
      return signalPassFailure();
    }
    FailureOr<FloatType> type =
        switchyard::parseRoundingType(&getContext(), elementType);
    if (failed(type)) {
      emitError(getOperation().getLoc())
          << "switchyard-gpu-row-kernels: unsupported element-type '"
          << elementType << "'; expected f32, bf16 or f16";
      return signalPassFailure();
    }
    roundTo = *type;
    SmallVector<scf::ForallOp> loops;
    getOperation().walk([&](scf::ForallOp forall) {
      if (isRowLoop(forall))
        loops.push_back(forall);
    });
    IRRewriter rewriter(&getContext());
    for (scf::ForallOp forall : loops)
      if (failed(lower(rewriter, forall)))
        return signalPassFailure();
  }

  LogicalResult lower(RewriterBase &rewriter, scf::ForallOp forall) {
    if (forall->getNumResults() != 0 || !forall.isNormalized())
      return forall.emitOpError(
          "over rows must be bufferized and start at 0 with step 1");
    Location loc = forall.getLoc();
    // A row's temporaries (the results the ops after it read, which nothing
    // outside the row does) live in shared memory, after the partials.
    int64_t sharedBytes = blockSize * 4;
    DenseMap<Operation *, int64_t> sharedOffsets;
    for (Operation &op : forall.getBody()->without_terminator()) {
      if (!isa<gpu::AllocOp, memref::AllocOp>(op))
        continue;
      auto type = cast<MemRefType>(op.getResult(0).getType());
      if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat())
        return op.emitOpError("in a row kernel needs a static shape");
      for (Operation *user : op.getUsers())
        if (!isa<memref::LoadOp, memref::StoreOp, linalg::LinalgOp,
                 gpu::DeallocOp, memref::DeallocOp>(user))
          return user->emitOpError(
              "on a row kernel's temporary is not supported");
      sharedBytes = llvm::alignTo(sharedBytes, 16);
      sharedOffsets[&op] = sharedBytes;
      sharedBytes +=
          type.getNumElements() * llvm::divideCeil(type.getElementTypeBitWidth(), 8);
    }
    if (sharedBytes > kMaxSharedBytes)
      return forall.emitOpError("over rows needs ")
             << sharedBytes << " bytes of shared memory, more than "
             << kMaxSharedBytes;
    rewriter.setInsertionPoint(forall);
    SmallVector<Value> rows = getValueOrCreateConstantIndexOp(
        rewriter, loc, forall.getMixedUpperBound());
    RowEmitter emit{rewriter, loc, Value(), blockSize, Value()};
    Value one = emit.cst(1);
    auto launch = gpu::LaunchOp::create(
        rewriter, loc, emit.product(rows), one, one, emit.cst(blockSize), one,
        one,
        arith::ConstantIntOp::create(rewriter, loc, rewriter.getI32Type(),
                                     sharedBytes));
    rewriter.setInsertionPointToStart(&launch.getBody().front());
    auto workgroup = gpu::AddressSpaceAttr::get(rewriter.getContext(),
                                                gpu::AddressSpace::Workgroup);
    Value shared = gpu::DynamicSharedMemoryOp::create(
        rewriter, loc,
        MemRefType::get({ShapedType::kDynamic}, rewriter.getI8Type(),
                        AffineMap(), workgroup));
    emit.partials = memref::ViewOp::create(
        rewriter, loc,
        MemRefType::get({blockSize}, rewriter.getF32Type(), AffineMap(),
                        workgroup),
        shared, emit.cst(0), ValueRange{});
    emit.tid = launch.getThreadIds().x;

    IRMapping map;
    for (auto [iv, index] : llvm::zip(
             forall.getInductionVars(),
             emit.delinearize(launch.getBlockIds().x, rows)))
      map.map(iv, index);
    for (Operation &op : forall.getBody()->without_terminator()) {
      if (isa<gpu::DeallocOp, memref::DeallocOp>(op))
        continue;
      if (auto offset = sharedOffsets.find(&op); offset != sharedOffsets.end()) {
        auto type = cast<MemRefType>(op.getResult(0).getType());
        map.map(op.getResult(0),
                memref::ViewOp::create(
                    rewriter, loc,
                    MemRefType::get(type.getShape(), type.getElementType(),
                                    AffineMap(), workgroup),
                    shared, emit.cst(offset->second), ValueRange{}));
        continue;
      }
      Operation *copy = rewriter.clone(op, map);
      // Fills and the copies bufferization adds: generic ops like the rest.
      auto named = dyn_cast<linalg::LinalgOp>(copy);
      if (named && !isa<linalg::GenericOp>(copy)) {
        FailureOr<linalg::GenericOp> generic =
            linalg::generalizeNamedOp(rewriter, named);
        if (failed(generic))
          return copy->emitOpError("in a row kernel is not supported");
        copy = *generic;
      }
      auto generic = dyn_cast<linalg::GenericOp>(copy);
      if (!generic)
        continue;
      if (roundTo)
        if (FailureOr<switchyard::Contraction> c =
                switchyard::matchContraction(generic);
            succeeded(c))
          switchyard::roundContractionFactors(rewriter, *c, roundTo);
      rewriter.setInsertionPoint(generic);
      if (Operation *combiner = singleCombiner(generic))
        emit.emitBlockReduction(generic, combiner);
      else
        emit.emitStrided(generic);
      gpu::BarrierOp::create(rewriter, loc);
      rewriter.eraseOp(generic);
      rewriter.setInsertionPointToEnd(&launch.getBody().front());
    }
    gpu::TerminatorOp::create(rewriter, loc);
    rewriter.eraseOp(forall);
    LLVM_DEBUG(llvm::dbgs() << "row kernel of " << blockSize
                            << " threads at " << loc << "\n");
    return success();
  }

  /// The type contractions' factors are rounded to; null: none.
  FloatType roundTo;
};

} // namespace

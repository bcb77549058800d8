//===- MarkEpilogues.cpp - contractions' elementwise consumers -----------===//
//
// Implements `switchyard-mark-epilogues` (see Passes.td): finds the
// elementwise consumer of each contraction on buffers, brings it next to
// the contraction, proves that computing it in the contraction's stores
// keeps the program's meaning, and marks it (Epilogues.h).
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/Common/Epilogues.h"
#include "lib/Codegen/Common/HostCode.h"
#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDMARKEPILOGUESPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-mark-epilogues"

using namespace mlir;
using namespace mlir::switchyard;

namespace {

/// Whether the root buffer `root` (viewedBuffer) is one whose aliases the
/// pass can tell: an allocation of the function (only its views alias it)
/// or an argument (which may alias any other argument). A buffer that
/// another op picks (arith.select, scf.if, a call) may be any of several.
bool knownRoot(Value root) {
  return isFreshAllocation(root) || isa<BlockArgument>(root);
}

/// Whether every buffer `op` takes has a known root (knownRoot).
bool buffersKnown(Operation *op) {
  return llvm::all_of(op->getOperands(), [](Value v) {
    return !isa<MemRefType>(v.getType()) || knownRoot(viewedBuffer(v));
  });
}

/// Whether the body of linalg op `op` reads or writes no memory: its
/// accesses are then its operands'.
bool bodyWithoutEffects(linalg::LinalgOp op) {
  return llvm::all_of(op.getBlock()->without_terminator(), [](Operation &nested) {
    return isMemoryEffectFree(&nested);
  });
}

/// The buffers a linalg op on buffers reads (its inputs; its outputs count
/// as written) and writes (its outputs), as roots (viewedBuffer).
BufferAccesses linalgAccesses(linalg::LinalgOp op) {
  BufferAccesses accesses;
  for (OpOperand &operand : op->getOpOperands())
    if (isa<MemRefType>(operand.get().getType()))
      (op.isDpsInit(&operand) ? accesses.writes : accesses.reads)
          .push_back(viewedBuffer(operand.get()));
  return accesses;
}

/// The first linalg.generic after `contraction` that reads its output
/// `product` (or a view of it), when only these stand between them:
/// allocations, ops without memory effects and loads of buffers that
/// nothing between writes (collected in `between`),
/// and linalg ops on buffers that do not touch `product` (in `skipped`),
/// whose bodies access no memory and whose buffers have known roots.
linalg::GenericOp firstReader(linalg::LinalgOp contraction, Value product,
                              SmallVectorImpl<Operation *> &between,
                              SmallVectorImpl<linalg::LinalgOp> &skipped) {
  Value root = viewedBuffer(product);
  for (Operation *next = contraction->getNextNode(); next;
       next = next->getNextNode()) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(next);
    if (linalgOp && linalgOp.hasPureBufferSemantics()) {
      if (!buffersKnown(next) || !bodyWithoutEffects(linalgOp))
        return nullptr;
      BufferAccesses accesses = linalgAccesses(linalgOp);
      if (llvm::is_contained(accesses.reads, root) ||
          llvm::is_contained(accesses.writes, root))
        return dyn_cast<linalg::GenericOp>(next);
      skipped.push_back(linalgOp);
      continue;
    }
    // A scalar read (a training step's seed) of a buffer that neither the
    // contraction nor a skipped op writes can move above them.
    if (auto load = dyn_cast<memref::LoadOp>(next)) {
      Value loaded = viewedBuffer(load.getMemref());
      if (!knownRoot(loaded) || loaded == root ||
          llvm::any_of(skipped, [&](linalg::LinalgOp op) {
            return llvm::any_of(linalgAccesses(op).writes,
                                [&](Value w) { return mayAlias(w, loaded); });
          }))
        return nullptr;
      between.push_back(next);
      continue;
    }
    if (next->hasTrait<OpTrait::IsTerminator>() || formsKernel(next) ||
        !onlyAllocates(next))
      return nullptr;
    between.push_back(next);
  }
  return nullptr;
}

/// `consumer` with its loops collapsed to the dimensions of `product` where
/// it reads an expand_shape of `product` at its loop indices, the collapsed
/// read replaced by `product` itself; `consumer` where it needs no
/// collapsing; null where its loops cannot be collapsed.
linalg::GenericOp collapseToProduct(RewriterBase &rewriter,
                                    linalg::GenericOp consumer,
                                    Value product) {
  memref::ExpandShapeOp expand;
  for (OpOperand *input : consumer.getDpsInputOperands()) {
    auto view = input->get().getDefiningOp<memref::ExpandShapeOp>();
    if (view && view.getSrc() == product &&
        consumer.getMatchingIndexingMap(input).isIdentity())
      expand = view;
  }
  if (!expand)
    return consumer;
  SmallVector<ReassociationIndices> groups = expand.getReassociationIndices();
  if (!consumer.hasPureBufferSemantics() ||
      consumer.getNumLoops() != expand.getResultType().getRank() ||
      !linalg::areDimSequencesPreserved(consumer.getIndexingMapsArray(),
                                        groups))
    return nullptr;
  rewriter.setInsertionPoint(consumer);
  FailureOr<linalg::CollapseResult> collapsed =
      linalg::collapseOpIterationDims(consumer, groups, rewriter);
  if (failed(collapsed))
    return nullptr;
  auto result = dyn_cast<linalg::GenericOp>(collapsed->collapsedOp.getOperation());
  if (!result) {
    rewriter.eraseOp(collapsed->collapsedOp);
    return nullptr;
  }
  rewriter.eraseOp(consumer);
  for (OpOperand *input : result.getDpsInputOperands()) {
    auto view = input->get().getDefiningOp<memref::CollapseShapeOp>();
    if (view && view.getSrc() == expand.getResult() &&
        view.getType() == product.getType())
      rewriter.modifyOpInPlace(result, [&] { input->set(product); });
  }
  return result;
}

/// Whether computing `consumer` in the stores of `contraction` keeps the
/// program's meaning: every buffer either takes has a known root
/// (knownRoot); its result `C` is an allocation of the function,
/// which the consumer reads only at the loop indices
/// (isElementwiseEpilogue); every output is `C` or another allocation,
/// none a factor of the contraction, read by the consumer only where it is
/// written.
bool fusionKeepsMeaning(linalg::LinalgOp contraction,
                        linalg::GenericOp consumer) {
  Value product = contraction.getDpsInitOperand(0)->get();
  Value productRoot = viewedBuffer(product);
  if (!isFreshAllocation(productRoot) || !buffersKnown(contraction) ||
      !buffersKnown(consumer))
    return false;
  for (OpOperand &operand : consumer->getOpOperands())
    if (isa<MemRefType>(operand.get().getType()) &&
        viewedBuffer(operand.get()) == productRoot && operand.get() != product)
      return false;
  SmallVector<Value> outputRoots;
  for (OpOperand &output : consumer.getDpsInitsMutable()) {
    Value root = viewedBuffer(output.get());
    if (root == productRoot)
      continue;
    if (!isFreshAllocation(root) || llvm::is_contained(outputRoots, root))
      return false;
    outputRoots.push_back(root);
    for (OpOperand *input : contraction.getDpsInputOperands())
      if (viewedBuffer(input->get()) == root)
        return false;
    for (OpOperand *input : consumer.getDpsInputOperands())
      if (isa<MemRefType>(input->get().getType()) &&
          viewedBuffer(input->get()) == root &&
          (input->get() != output.get() ||
           consumer.getMatchingIndexingMap(input) !=
               consumer.getMatchingIndexingMap(&output)))
        return false;
  }
  return true;
}

struct SwitchyardMarkEpiloguesPass
    : public switchyard::impl::SwitchyardMarkEpiloguesPassBase<
          SwitchyardMarkEpiloguesPass> {
  void runOnOperation() override {
    // The contractions directly in the function's body: those nested in a
    // loop (a row group's dot products) become parts of other kernels.
    SmallVector<linalg::LinalgOp> contractions;
    for (Block &block : getOperation().getBody())
      for (auto op : block.getOps<linalg::LinalgOp>())
        if (succeeded(matchContraction(op)))
          contractions.push_back(op);
    IRRewriter rewriter(&getContext());
    [[maybe_unused]] unsigned marked = 0;
    for (linalg::LinalgOp contraction : contractions) {
      Value product = contraction.getDpsInitOperand(0)->get();
      // Only an allocation of the function is known to be read by no one
      // else; collapsing the consumer's loops for nothing would change its
      // kernel.
      if (!isFreshAllocation(viewedBuffer(product)))
        continue;
      SmallVector<Operation *> between;
      SmallVector<linalg::LinalgOp> skipped;
      linalg::GenericOp consumer =
          firstReader(contraction, product, between, skipped);
      if (!consumer || !llvm::all_of(skipped, [&](linalg::LinalgOp op) {
            return independent(linalgAccesses(op), linalgAccesses(consumer));
          }))
        continue;
      consumer = collapseToProduct(rewriter, consumer, product);
      if (!consumer)
        continue;
      // The collapse's views join the ops between the two.
      between.clear();
      skipped.clear();
      if (firstReader(contraction, product, between, skipped) != consumer ||
          !isElementwiseEpilogue(product, consumer) ||
          !fusionKeepsMeaning(contraction, consumer))
        continue;
      // The ops between move before the contraction and its zero fill;
      // none may use a value defined between the fill and the contraction.
      Operation *start = contraction;
      if (linalg::FillOp fill = precedingZeroFill(contraction))
        start = fill;
      bool movable = llvm::all_of(between, [&](Operation *op) {
        SetVector<Value> used(op->operand_begin(), op->operand_end());
        for (Region &region : op->getRegions())
          getUsedValuesDefinedAbove(region, used);
        return llvm::all_of(used, [&](Value v) {
          Operation *def = v.getDefiningOp();
          return !def || def->getBlock() != start->getBlock() ||
                 def->isBeforeInBlock(start) ||
                 llvm::is_contained(between, def);
        });
      });
      if (!movable)
        continue;
      for (Operation *op : between)
        op->moveBefore(start);
      consumer->moveAfter(contraction);
      consumer->setAttr(kEpilogueAttr, rewriter.getUnitAttr());
      ++marked;
    }
    LLVM_DEBUG(llvm::dbgs() << getOperation().getSymName() << ": " << marked
                            << " epilogue(s) marked\n");
  }
};

} // namespace

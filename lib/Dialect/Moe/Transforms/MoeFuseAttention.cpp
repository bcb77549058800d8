//===- MoeFuseAttention.cpp - flash-style attention, forward and backward -===//
//
// Implements moe-fuse-attention: moe.attention becomes moe.flash_attention
// (output and row logsumexp, computed with an online softmax) and
// moe.attention_grad becomes moe.flash_attention_grad, fed by the forward
// op of the same operands where the block has one and by a recomputation
// otherwise. The kernels themselves are built by convert-moe-to-linalg
// (lib/Conversion/MoeToLinalg/FlashAttention.cpp).
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeOps.h"
#include "dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEATTENTIONPASS
#include "dialect/Moe/Transforms/Passes.h.inc"
} // namespace mlir::moe

#define DEBUG_TYPE "moe-fuse-attention"

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Whether the flash kernels can take the attention of `op`: a row of a
/// head is a vector<F>, so F must be static, and its keys end where its
/// queries end (a decoding step's `at` position stays with the unfused
/// lowering, whose single query row is no bigger than the flash kernel's).
template <typename Op> bool isFusable(Op op) {
  return !op.getQuery().getType().isDynamicDim(3) && !op.getPosition();
}

/// The [B, T, H] f32 type of the row logsumexp of `query` [B, T, H, F].
RankedTensorType logsumexpType(Value query) {
  auto type = cast<RankedTensorType>(query.getType());
  return RankedTensorType::get(type.getShape().drop_back(),
                               Float32Type::get(type.getContext()));
}

/// A moe.flash_attention of (q, k, v, rel) before `before`.
FlashAttentionOp createFlash(RewriterBase &rewriter, Operation *before, Value q,
                             Value k, Value v, Value rel) {
  rewriter.setInsertionPoint(before);
  SmallVector<Value> operands = {q, k, v};
  if (rel)
    operands.push_back(rel);
  return FlashAttentionOp::create(rewriter, before->getLoc(),
                                  TypeRange{q.getType(), logsumexpType(q)},
                                  operands);
}

/// The moe.flash_attention of the gradient's operands that precedes it in
/// its block, if any.
FlashAttentionOp findForward(AttentionGradOp grad) {
  FlashAttentionOp found;
  for (Operation &op : *grad->getBlock()) {
    if (&op == grad.getOperation())
      break;
    auto flash = dyn_cast<FlashAttentionOp>(op);
    if (flash && flash.getQuery() == grad.getQuery() &&
        flash.getKey() == grad.getKey() &&
        flash.getValue() == grad.getValue() && flash.getRel() == grad.getRel())
      found = flash;
  }
  return found;
}

/// Rewrites the forward ops first, so that the gradients find them.
struct MoeFuseAttentionPass
    : public moe::impl::MoeFuseAttentionPassBase<MoeFuseAttentionPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<AttentionOp> forwards;
    getOperation()->walk([&](AttentionOp op) {
      if (isFusable(op))
        forwards.push_back(op);
    });
    for (AttentionOp op : forwards) {
      LLVM_DEBUG(llvm::dbgs() << "moe.attention at " << op.getLoc()
                              << " -> moe.flash_attention\n");
      FlashAttentionOp flash = createFlash(
          rewriter, op, op.getQuery(), op.getKey(), op.getValue(), op.getRel());
      rewriter.replaceOp(op, flash.getResult());
    }

    SmallVector<AttentionGradOp> gradients;
    getOperation()->walk([&](AttentionGradOp op) {
      if (isFusable(op))
        gradients.push_back(op);
    });
    for (AttentionGradOp op : gradients) {
      FlashAttentionOp forward = findForward(op);
      LLVM_DEBUG(llvm::dbgs() << "moe.attention_grad at " << op.getLoc()
                              << " -> moe.flash_attention_grad, "
                              << (forward ? "reading the forward op's outputs"
                                          : "recomputing the forward pass")
                              << "\n");
      if (!forward)
        forward = createFlash(rewriter, op, op.getQuery(), op.getKey(),
                              op.getValue(), op.getRel());
      rewriter.setInsertionPoint(op);
      SmallVector<Value> operands = {
          op.getQuery(),          op.getKey(),
          op.getValue(),          forward.getResult(),
          forward.getLogsumexp(), op.getResultGrad()};
      if (Value rel = op.getRel())
        operands.push_back(rel);
      auto fused = FlashAttentionGradOp::create(rewriter, op.getLoc(),
                                                op->getResultTypes(), operands);
      rewriter.replaceOp(op, fused.getResults());
    }
  }
};

} // namespace

//===- LmExposeProbes.cpp - return what a model computes on the way -------===//
//
// Implements `lm-expose-probes`: the ops that lm-decompose-layers{probes}
// marked become extra results of their function (attention weights, the
// routers' gates and experts), for `switchyard analyze`.
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_LMEXPOSEPROBESPASS
#include "lib/Conversion/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;

namespace {

struct LmExposeProbesPass
    : public switchyard::impl::LmExposeProbesPassBase<LmExposeProbesPass> {
  void runOnOperation() override {
    for (func::FuncOp func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration() || func.isPrivate())
        continue;
      // The probes, in the order of their ops.
      SmallVector<std::pair<std::string, Value>> probes;
      WalkResult walk = func.walk([&](Operation *op) {
        auto name = op->getAttrOfType<StringAttr>(switchyard::kProbeAttr);
        if (!name)
          return WalkResult::advance();
        op->removeAttr(switchyard::kProbeAttr);
        if (op->getParentOp() != func) {
          op->emitOpError() << "is a probe inside a region; lm-expose-probes "
                               "returns the probes of a function's body";
          return WalkResult::interrupt();
        }
        OpBuilder b(op->getContext());
        b.setInsertionPointAfter(op);
        if (auto attention = dyn_cast<moe::AttentionOp>(op)) {
          auto q = cast<RankedTensorType>(attention.getQuery().getType());
          auto k = cast<RankedTensorType>(attention.getKey().getType());
          auto type = RankedTensorType::get({q.getDimSize(0), q.getDimSize(2),
                                             q.getDimSize(1), k.getDimSize(1)},
                                            b.getF32Type());
          Value weights = moe::AttentionWeightsOp::create(
              b, op->getLoc(), type, attention.getQuery(), attention.getKey(),
              attention.getRel());
          probes.emplace_back(name.str() + ".weights", weights);
        } else if (auto topk = dyn_cast<moe::TopKOp>(op)) {
          probes.emplace_back(name.str() + ".gates", topk.getValues());
          probes.emplace_back(name.str() + ".experts", topk.getIndices());
        } else {
          op->emitOpError() << "is marked as a probe, which lm-expose-probes "
                               "reads only from moe.attention and moe.topk";
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
      if (probes.empty())
        continue;

      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      SmallVector<Value> results(ret.getOperands());
      SmallVector<Type> types(func.getResultTypes());
      unsigned first = types.size();
      for (auto &[name, value] : probes) {
        results.push_back(value);
        types.push_back(value.getType());
      }
      ret->setOperands(results);
      func.setType(
          FunctionType::get(&getContext(), func.getArgumentTypes(), types));
      for (auto [i, probe] : llvm::enumerate(probes))
        func.setResultAttr(first + i, switchyard::kProbeAttr,
                           StringAttr::get(&getContext(), probe.first));
    }
  }
};

} // namespace

//===- RoundContractionOperands.cpp - matmul factors to bf16 / f16 --------===//
//
// Implements `switchyard-round-contraction-operands`: the factors of every
// matmul-like linalg op are rounded to a 16-bit float type, with the code
// that the tensor-core pass's SIMT fallback uses (Contractions.h), so that
// the CPU target computes a reference for the GPU's bf16/f16 matmuls.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/Common/Passes.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDROUNDCONTRACTIONOPERANDSPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-round-contraction-operands"

using namespace mlir;

namespace {
/// Rounds the factors of every matmul-like linalg op in a function.
struct SwitchyardRoundContractionOperandsPass
    : public switchyard::impl::SwitchyardRoundContractionOperandsPassBase<
          SwitchyardRoundContractionOperandsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    FailureOr<FloatType> type =
        switchyard::parseRoundingType(&getContext(), elementType);
    if (failed(type)) {
      func.emitError() << "switchyard-round-contraction-operands: "
                          "unsupported element-type '"
                       << elementType << "'; expected f32, bf16 or f16";
      return signalPassFailure();
    }
    if (!*type)
      return;
    // Matched first, rewritten after: rounding adds casts to the bodies.
    SmallVector<switchyard::Contraction> contractions;
    func.walk([&](linalg::LinalgOp op) {
      if (FailureOr<switchyard::Contraction> c = switchyard::matchContraction(op);
          succeeded(c))
        contractions.push_back(*c);
    });
    LLVM_DEBUG(llvm::dbgs() << "@" << func.getName() << ": rounding the "
                            << "factors of " << contractions.size()
                            << " contractions to " << *type << "\n");
    IRRewriter rewriter(&getContext());
    for (switchyard::Contraction &c : contractions)
      switchyard::roundContractionFactors(rewriter, c, *type);
  }
};
} // namespace

//===- MoeToLinalg.h - moe to linalg lowering patterns ----------*- C++ -*-===//
//
// The reference lowering of the `moe` ops to linalg on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_CONVERSION_MOETOLINALG_MOETOLINALG_H
#define SWITCHYARD_DIALECT_CONVERSION_MOETOLINALG_MOETOLINALG_H

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::switchyard {

/// Adds the patterns that rewrite each `moe` op into linalg.generic ops.
void populateMoeToLinalgPatterns(RewritePatternSet &patterns);

} // namespace mlir::switchyard

#endif // SWITCHYARD_DIALECT_CONVERSION_MOETOLINALG_MOETOLINALG_H

//===- Contractions.h - matmul-like linalg ops and their rounding -*- C++ -*-===//
//
// The matmul-like linalg ops that the tensor-core route handles, and the
// rounding of their two factors to a 16-bit float type: one implementation,
// used by switchyard-gpu-tensor-core-matmul (its SIMT fallback on sm_75 and
// for shapes the tensor-core kernel does not take) and by
// switchyard-round-contraction-operands, which gives the CPU target the same
// rounding, so that it computes a reference for the GPU's bf16/f16 matmuls.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_CONTRACTIONS_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_CONTRACTIONS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

#include <array>

namespace mlir::switchyard {

/// A matmul-like linalg op: `out += x * y` over the contraction dimensions
/// that `linalg::inferContractionDims` finds, in f32.
struct Contraction {
  linalg::LinalgOp op;
  linalg::ContractionDimensions dims;
  arith::MulFOp mul;
  /// The multiplication's operand that derives from input i, as f32.
  std::array<Value, 2> factors;
};

/// Returns the contraction that `op` is, or failure. The op must be on
/// buffers with two inputs and one f32 output, and its body exactly
/// `yield(addf(out, mulf(cast*(in0), cast*(in1))))` (either order), the
/// casts being arith.extf / arith.truncf, the product f32, the inputs f32,
/// bf16 or f16; it must have at least one contraction (K) dimension.
FailureOr<Contraction> matchContraction(linalg::LinalgOp op);

/// The f32 `value` rounded to `elementType` and back to f32 (arith.truncf
/// then arith.extf), as tensor cores see a factor.
Value roundThrough(OpBuilder &b, Location loc, Value value,
                   FloatType elementType);

/// Rounds both factors of `c` to `elementType` and back to f32
/// (`arith.truncf` then `arith.extf` before the multiplication), as tensor
/// cores see them; updates `c.factors`.
void roundContractionFactors(RewriterBase &rewriter, Contraction &c,
                             FloatType elementType);

/// The linalg.fill of +0.0 into `op`'s first output that comes right
/// before it (only ops without memory effects between them), or null: a
/// matmul kernel that writes every element of that output can start its
/// accumulators from zero instead, and the fill goes.
linalg::FillOp precedingZeroFill(DestinationStyleOpInterface op);

/// Nests the loops of `op` in `order` (order[i]: the old loop dimension
/// that becomes loop i), generalizing a named op first. Returns the
/// interchanged op, or failure (with an error on `op`) where that is not
/// possible.
FailureOr<linalg::GenericOp> reorderLoops(RewriterBase &rewriter,
                                          linalg::LinalgOp op,
                                          ArrayRef<unsigned> order);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_CONTRACTIONS_H

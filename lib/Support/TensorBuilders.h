//===- TensorBuilders.h - helpers that build linalg on tensors --*- C++ -*-===//
//
// Small builders shared by the lowerings of `lm` and `moe`: sizes of a
// tensor, filled tensors, element-wise maps, and linalg.generic
// contractions that accumulate in f32. They keep the lowering patterns about
// the maths, not about the plumbing of linalg.generic.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_SUPPORT_TENSORBUILDERS_H
#define SWITCHYARD_LIB_SUPPORT_TENSORBUILDERS_H

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir::switchyard {

/// The body of a generic: receives the input elements followed by the
/// current output element and returns the new output element.
using GenericBody =
    llvm::function_ref<Value(ImplicitLocOpBuilder &, ValueRange)>;

/// The element type of a shaped value.
Type elementTypeOf(Value value);

/// The sizes of a ranked tensor: constants where static, tensor.dim else.
SmallVector<OpFoldResult> sizesOf(ImplicitLocOpBuilder &b, Value tensor);

/// One size of a ranked tensor as an index value.
Value dimOf(ImplicitLocOpBuilder &b, Value tensor, int64_t dim);

/// A new tensor of the given sizes and element type, filled with `value`.
Value filled(ImplicitLocOpBuilder &b, ArrayRef<OpFoldResult> sizes,
             Type elementType, double value);

/// A linalg.generic with one output `init`; returns its result.
Value generic(ImplicitLocOpBuilder &b, ValueRange inputs, Value init,
              ArrayRef<AffineMap> maps, ArrayRef<utils::IteratorType> iterators,
              GenericBody body);

/// Σ lhs·rhs over the reduction dimensions, accumulated into a new f32
/// tensor of `sizes` indexed by `outMap`. Inputs of other float types are
/// extended to f32 element by element.
Value contractF32(ImplicitLocOpBuilder &b, Value lhs, AffineMap lhsMap,
                  Value rhs, AffineMap rhsMap, AffineMap outMap,
                  ArrayRef<utils::IteratorType> iterators,
                  ArrayRef<OpFoldResult> sizes);

/// acc + Σ lhs·rhs over the reduction dimensions, for an f32 tensor `acc`
/// indexed by `outMap`: contractF32 onto existing sums.
Value accumulateF32(ImplicitLocOpBuilder &b, Value lhs, AffineMap lhsMap,
                    Value rhs, AffineMap rhsMap, AffineMap outMap,
                    ArrayRef<utils::IteratorType> iterators, Value acc);

/// `x · wᵀ` for x [N, K] and w [M, K]: an f32 [N, M] tensor.
Value matmulTransposedF32(ImplicitLocOpBuilder &b, Value x, Value w);

/// Applies `fn` to every element of `input`; the result has the same shape
/// and element type `resultType`.
Value mapElements(ImplicitLocOpBuilder &b, Value input, Type resultType,
                  llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> fn);

/// Converts a float tensor to another float element type (extf / truncf);
/// returns `input` when the type already matches.
Value castElements(ImplicitLocOpBuilder &b, Value input, Type elementType);

/// `value` as type `type` (a tensor.cast between compatible shapes, where a
/// lowering built a result more or less static than the op's result type).
Value castTo(ImplicitLocOpBuilder &b, Value value, Type type);

/// Converts a float scalar to f32 (a no-op for f32).
Value toF32(ImplicitLocOpBuilder &b, Value scalar);

/// Converts an f32 scalar to `type` (a no-op for f32).
Value fromF32(ImplicitLocOpBuilder &b, Value scalar, Type type);

/// An index constant.
Value indexConstant(ImplicitLocOpBuilder &b, int64_t value);

/// The loop index `dim` inside a linalg.generic body.
Value loopIndex(ImplicitLocOpBuilder &b, int64_t dim);

/// The map from `rank` dims to the first `rank - 1` (a row of the last dim).
AffineMap rowMap(MLIRContext *context, unsigned rank);

/// An f32 constant.
Value f32Constant(ImplicitLocOpBuilder &b, double value);

/// An index value as f32 (through i64, so negative values survive).
Value indexToF32(ImplicitLocOpBuilder &b, Value index);

/// sigmoid(z) = 1 / (1 + exp(-z)) on an f32 scalar.
Value sigmoid(ImplicitLocOpBuilder &b, Value z);

/// Iterator-type lists: `parallel` dims then `reduction` dims.
SmallVector<utils::IteratorType> iterators(unsigned parallel,
                                           unsigned reduction = 0);

/// Affine maps over `numDims` dims selecting `dims`, in order.
AffineMap dimsMap(MLIRContext *context, unsigned numDims,
                  ArrayRef<unsigned> dims);

/// The element type an `element-type` pass option names: bf16 or f16, or
/// null for f32 (nothing to round); failure for anything else.
FailureOr<FloatType> parseRoundingType(MLIRContext *context,
                                       StringRef elementType);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_SUPPORT_TENSORBUILDERS_H

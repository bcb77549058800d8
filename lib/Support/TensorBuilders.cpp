//===- TensorBuilders.cpp - helpers that build linalg on tensors ----------===//
//
// Implements the linalg-on-tensors builders shared by the lowerings.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::switchyard;

Type mlir::switchyard::elementTypeOf(Value value) {
  return cast<ShapedType>(value.getType()).getElementType();
}

SmallVector<OpFoldResult> mlir::switchyard::sizesOf(ImplicitLocOpBuilder &b,
                                                    Value tensor) {
  return tensor::getMixedSizes(b, b.getLoc(), tensor);
}

Value mlir::switchyard::dimOf(ImplicitLocOpBuilder &b, Value tensor,
                              int64_t dim) {
  return getValueOrCreateConstantIndexOp(b, b.getLoc(),
                                         sizesOf(b, tensor)[dim]);
}

Value mlir::switchyard::filled(ImplicitLocOpBuilder &b,
                               ArrayRef<OpFoldResult> sizes, Type elementType,
                               double value) {
  Value empty = tensor::EmptyOp::create(b, sizes, elementType);
  Value scalar = arith::ConstantOp::create(b, elementType,
                                           b.getFloatAttr(elementType, value));
  return linalg::FillOp::create(b, scalar, empty).getResult(0);
}

Value mlir::switchyard::generic(ImplicitLocOpBuilder &b, ValueRange inputs,
                                Value init, ArrayRef<AffineMap> maps,
                                ArrayRef<utils::IteratorType> iterators,
                                GenericBody body) {
  auto op = linalg::GenericOp::create(
      b, TypeRange{init.getType()}, inputs, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        ImplicitLocOpBuilder inner(loc, nested);
        linalg::YieldOp::create(inner, body(inner, args));
      });
  return op.getResult(0);
}

Value mlir::switchyard::castTo(ImplicitLocOpBuilder &b, Value value,
                               Type type) {
  if (value.getType() == type)
    return value;
  return tensor::CastOp::create(b, type, value);
}

Value mlir::switchyard::toF32(ImplicitLocOpBuilder &b, Value scalar) {
  if (scalar.getType().isF32())
    return scalar;
  return arith::ExtFOp::create(b, b.getF32Type(), scalar);
}

Value mlir::switchyard::fromF32(ImplicitLocOpBuilder &b, Value scalar,
                                Type type) {
  if (type.isF32())
    return scalar;
  return arith::TruncFOp::create(b, type, scalar);
}

Value mlir::switchyard::contractF32(ImplicitLocOpBuilder &b, Value lhs,
                                    AffineMap lhsMap, Value rhs,
                                    AffineMap rhsMap, AffineMap outMap,
                                    ArrayRef<utils::IteratorType> iterators,
                                    ArrayRef<OpFoldResult> sizes) {
  return accumulateF32(b, lhs, lhsMap, rhs, rhsMap, outMap, iterators,
                       filled(b, sizes, b.getF32Type(), 0.0));
}

Value mlir::switchyard::accumulateF32(ImplicitLocOpBuilder &b, Value lhs,
                                      AffineMap lhsMap, Value rhs,
                                      AffineMap rhsMap, AffineMap outMap,
                                      ArrayRef<utils::IteratorType> iterators,
                                      Value acc) {
  return generic(b, {lhs, rhs}, acc, {lhsMap, rhsMap, outMap}, iterators,
                 [](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                   Value product = arith::MulFOp::create(b, toF32(b, args[0]),
                                                         toF32(b, args[1]));
                   return arith::AddFOp::create(b, args[2], product);
                 });
}

Value mlir::switchyard::matmulTransposedF32(ImplicitLocOpBuilder &b, Value x,
                                            Value w) {
  MLIRContext *ctx = b.getContext();
  // (n, m, k): x(n, k) · w(m, k) -> out(n, m).
  return contractF32(b, x, dimsMap(ctx, 3, {0, 2}), w, dimsMap(ctx, 3, {1, 2}),
                     dimsMap(ctx, 3, {0, 1}), iterators(2, 1),
                     {sizesOf(b, x)[0], sizesOf(b, w)[0]});
}

Value mlir::switchyard::mapElements(
    ImplicitLocOpBuilder &b, Value input, Type resultType,
    llvm::function_ref<Value(ImplicitLocOpBuilder &, Value)> fn) {
  auto type = cast<RankedTensorType>(input.getType());
  Value init = tensor::EmptyOp::create(b, sizesOf(b, input), resultType);
  AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
  return generic(
      b, input, init, {identity, identity}, iterators(type.getRank()),
      [&](ImplicitLocOpBuilder &b, ValueRange args) { return fn(b, args[0]); });
}

Value mlir::switchyard::castElements(ImplicitLocOpBuilder &b, Value input,
                                     Type elementType) {
  Type current = cast<RankedTensorType>(input.getType()).getElementType();
  if (current == elementType)
    return input;
  return mapElements(b, input, elementType,
                     [&](ImplicitLocOpBuilder &b, Value v) -> Value {
                       unsigned from = current.getIntOrFloatBitWidth();
                       unsigned to = elementType.getIntOrFloatBitWidth();
                       if (from < to)
                         return arith::ExtFOp::create(b, elementType, v);
                       if (from == to) // f16 <-> bf16: through f32.
                         v = arith::ExtFOp::create(b, b.getF32Type(), v);
                       return arith::TruncFOp::create(b, elementType, v);
                     });
}

Value mlir::switchyard::indexConstant(ImplicitLocOpBuilder &b, int64_t value) {
  return arith::ConstantIndexOp::create(b, value);
}

Value mlir::switchyard::loopIndex(ImplicitLocOpBuilder &b, int64_t dim) {
  return linalg::IndexOp::create(b, dim);
}

AffineMap mlir::switchyard::rowMap(MLIRContext *context, unsigned rank) {
  SmallVector<unsigned> dims;
  for (unsigned d = 0; d + 1 < rank; ++d)
    dims.push_back(d);
  return dimsMap(context, rank, dims);
}

Value mlir::switchyard::f32Constant(ImplicitLocOpBuilder &b, double value) {
  return arith::ConstantOp::create(
      b, b.getF32Type(), b.getF32FloatAttr(static_cast<float>(value)));
}

Value mlir::switchyard::indexToF32(ImplicitLocOpBuilder &b, Value index) {
  Value wide = arith::IndexCastOp::create(b, b.getI64Type(), index);
  return arith::SIToFPOp::create(b, b.getF32Type(), wide);
}

Value mlir::switchyard::sigmoid(ImplicitLocOpBuilder &b, Value z) {
  Type f32 = b.getF32Type();
  Value one = arith::ConstantOp::create(b, f32, b.getF32FloatAttr(1.0f));
  Value negated = arith::NegFOp::create(b, z);
  Value denominator =
      arith::AddFOp::create(b, one, math::ExpOp::create(b, negated));
  return arith::DivFOp::create(b, one, denominator);
}

SmallVector<utils::IteratorType>
mlir::switchyard::iterators(unsigned parallel, unsigned reduction) {
  SmallVector<utils::IteratorType> result(parallel,
                                          utils::IteratorType::parallel);
  result.append(reduction, utils::IteratorType::reduction);
  return result;
}

AffineMap mlir::switchyard::dimsMap(MLIRContext *context, unsigned numDims,
                                    ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned dim : dims)
    exprs.push_back(getAffineDimExpr(dim, context));
  return AffineMap::get(numDims, 0, exprs, context);
}

FailureOr<FloatType>
mlir::switchyard::parseRoundingType(MLIRContext *context,
                                    StringRef elementType) {
  if (elementType == "f32")
    return FloatType();
  if (elementType == "bf16")
    return FloatType(BFloat16Type::get(context));
  if (elementType == "f16")
    return FloatType(Float16Type::get(context));
  return failure();
}

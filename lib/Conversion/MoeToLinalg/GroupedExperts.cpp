//===- GroupedExperts.cpp - the grouped (CVMM) expert formulation ---------===//
//
// The expert projections with the routes grouped by expert, as the paper's
// CVMM kernel computes them (arXiv 2312.07987): the routes
// (n, h, j) are sorted by their expert h·E + indices[n, h, j], each route's
// input row is gathered into the sorted order, every expert multiplies its
// own contiguous block of rows by its weight (one plain matmul per expert,
// which the CPU's register-blocked kernels take), and the products are
// summed back over the routes, scaled by their gates. That costs the routes'
// MACs, k/E of the dense formulation's (MoeToLinalg.cpp), plus the sort and
// the gathers. The sort and each expert's block size are read by host code,
// so that formulation is the CPU target's (convert-moe-to-linalg
// `grouped-experts`).
//
// With `grouped-tile-rows` T > 0 nothing is read on the host, which the GPU
// needs: the sort is a kernel op (moe.sort_routes: a stable counting sort,
// each expert's segment of rows padded to a multiple of T and starting at
// a multiple of T; it needs static heads and expert rows, and leaves other
// ops to the remaining patterns), and the products are two kernel ops:
// moe.grouped_matmul (every tile of T rows with its expert's weight; the
// GPU's tensor cores take it as one launch) and moe.grouped_weight_grad
// (per expert, the sum over its segment). The kernels gather their rows by
// route (the ops' `gather`: `order` names the route at each padded
// position, gates are applied as the rows are read), so that no sorted
// copy of the rows is made; only where the heads or the choices per head
// are dynamic are the rows scattered into the padded order first. The
// padding costs at most T - 1 rows per expert.
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Conversion/MoeToLinalg/MoeToLinalg.h"
#include "lib/Dialect/Moe/Utils/Kernels.h"
#include "lib/Support/TensorBuilders.h"

#include "llvm/ADT/DenseMap.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::switchyard;

namespace {

/// A new index tensor of `sizes` filled with `value`.
Value filledIndex(ImplicitLocOpBuilder &b, ArrayRef<OpFoldResult> sizes,
                  int64_t value) {
  Value empty = tensor::EmptyOp::create(b, sizes, b.getIndexType());
  return linalg::FillOp::create(b, indexConstant(b, value), empty).getResult(0);
}

/// The routes of an expert op sorted by expert, and the kernels that work
/// in that order. A route r = (n·H + h)·k + j is token n's j-th choice in
/// head h; its expert is h·E + indices[n, h, j], its row in the stacked
/// weight [H·E, A, B].
class SortedRoutes {
public:
  /// `tileRows` 0: the host formulation; T > 0: segments padded to
  /// multiples of T rows, sorted on the device.
  SortedRoutes(ImplicitLocOpBuilder &b, Value gates, Value indices,
               Value weight, int64_t tileRows)
      : b(b), gates(gates), indices(indices), tileRows(tileRows),
        staticExpertsPerHead(expertsPerHeadOf(indices, weight)) {
    tokens = dimOf(b, indices, 0);
    heads = dimOf(b, indices, 1);
    choices = dimOf(b, indices, 2);
    perHead = expertsPerHead(b, weight, gates);
    experts = dimOf(b, weight, 0);
    Value perToken = arith::MulIOp::create(b, heads, choices);
    routes = arith::MulIOp::create(b, tokens, perToken);
    if (tileRows > 0) {
      sortPadded();
      return;
    }
    sort();
    routeGates = gather(gates);
  }

  /// E, where the heads and the stacked weight's rows are static: what
  /// the sort without host reads needs (tileRows > 0).
  static std::optional<int64_t> expertsPerHeadOf(Value indices, Value weight) {
    int64_t heads = cast<RankedTensorType>(indices.getType()).getDimSize(1);
    int64_t rows = cast<RankedTensorType>(weight.getType()).getDimSize(0);
    if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(rows) ||
        heads <= 0 || rows % heads != 0)
      return std::nullopt;
    return rows / heads;
  }

  /// Rows in the sorted order: row i of `value` itself (`sorted`), or the
  /// i-th sorted route (n, h, j)'s row of `value`, value[n, w] ([N, W]) or
  /// value[n, h, w] ([N, H, W]), times the route's gate if `gated`. Kernels
  /// gather each expert's block where they use it, so that a block passes
  /// through the cache, not the whole [R, W] copy through memory.
  struct Rows {
    Value value;
    bool sorted = false;
    bool gated = false;
  };
  static Rows sorted(Value value) { return {value, true, false}; }
  static Rows gathered(Value value, bool gated) {
    return {value, false, gated};
  }

  /// The rows [begin, begin + count) of `rows`, f32 [count, W]. A gather
  /// is a loop over the rows that copies each (a vector loop over w): a
  /// generic over (i, w) would reload the route's index for every element,
  /// since LLVM cannot tell the copy's stores from the index buffer.
  Value block(ImplicitLocOpBuilder &b, const Rows &rows, Value begin,
              Value count) const {
    OpFoldResult width = sizesOf(b, rows.value).back();
    if (rows.sorted)
      return rowBlock(b, rows.value, begin, count, width);
    auto type = cast<RankedTensorType>(rows.value.getType());
    bool byHead = type.getRank() == 3;
    Value init = tensor::EmptyOp::create(
        b, ArrayRef<OpFoldResult>{count, width}, b.getF32Type());
    auto loop = scf::ForOp::create(
        b, indexConstant(b, 0), count, indexConstant(b, 1), ValueRange{init},
        [&](OpBuilder &nested, Location loc, Value i, ValueRange acc) {
          ImplicitLocOpBuilder b(loc, nested);
          Value sortedAt = arith::AddIOp::create(b, begin, i);
          auto [n, h, j] =
              coordinates(b, tensor::ExtractOp::create(b, order, sortedAt));
          OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
          SmallVector<OpFoldResult> offsets{n}, sizes{one}, strides{one};
          if (byHead) {
            offsets.push_back(h);
            sizes.push_back(one);
            strides.push_back(one);
          }
          offsets.push_back(zero);
          sizes.push_back(width);
          strides.push_back(one);
          auto rowType = RankedTensorType::get({type.getShape().back()},
                                               type.getElementType());
          Value row = tensor::ExtractSliceOp::create(b, rowType, rows.value,
                                                     offsets, sizes, strides);
          Value gate = rows.gated
                           ? tensor::ExtractOp::create(b, routeGates, sortedAt)
                                 .getResult()
                           : Value();
          auto outType =
              RankedTensorType::get({type.getShape().back()}, b.getF32Type());
          SmallVector<OpFoldResult> outOffsets{i, zero}, outSizes{one, width};
          Value out = tensor::ExtractSliceOp::create(
              b, outType, acc[0], outOffsets, outSizes,
              ArrayRef<OpFoldResult>{one, one});
          AffineMap id = b.getMultiDimIdentityMap(1);
          Value copied = generic(
              b, {row}, out, {id, id}, iterators(1),
              [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                Value v = toF32(b, args[0]);
                return gate ? arith::MulFOp::create(b, v, gate).getResult() : v;
              });
          scf::YieldOp::create(b, ValueRange{tensor::InsertSliceOp::create(
                                      b, copied, acc[0], outOffsets, outSizes,
                                      ArrayRef<OpFoldResult>{one, one})});
        });
    return loop.getResult(0);
  }

  /// out[i, c] = Σ_a rows[i, a] · W[e, a, c] (or W[e, c, a] if
  /// `transposed`) over the sorted routes i of each expert e: one matmul per
  /// expert on its block of rows; f32 [R, C].
  Value perExpert(const Rows &rows, Value weight, bool transposed) {
    MLIRContext *ctx = b.getContext();
    SmallVector<OpFoldResult> w = sizesOf(b, weight);
    OpFoldResult outer = transposed ? w[1] : w[2];
    if (tileRows > 0) {
      Value init = filled(b, {paddedRows, outer}, b.getF32Type(), 0.0);
      UnitAttr transpose = transposed ? b.getUnitAttr() : UnitAttr();
      IntegerAttr tile = b.getI64IntegerAttr(tileRows);
      if (std::optional<KernelOperand> gathered = kernelOperand(rows))
        return moe::GroupedMatmulOp::create(
                   b, TypeRange{init.getType()}, gathered->rows, weight,
                   tileExperts, order, gathered->gates, init, tile,
                   b.getI64IntegerAttr(gathered->routesPerRow), transpose)
            .getResult()[0];
      return moe::GroupedMatmulOp::create(b, TypeRange{init.getType()},
                                          padded(rows), weight, tileExperts,
                                          /*order=*/Value(), /*gates=*/Value(),
                                          init, tile, IntegerAttr(), transpose)
          .getResult()[0];
    }
    Value init = tensor::EmptyOp::create(
        b, ArrayRef<OpFoldResult>{routes, outer}, b.getF32Type());
    // (i, c | a)
    AffineMap weightMap =
        transposed ? dimsMap(ctx, 3, {1, 2}) : dimsMap(ctx, 3, {2, 1});
    return overExperts(
        init,
        [&](ImplicitLocOpBuilder &b, Value e, Value begin, Value count,
            Value acc) -> ExpertPart {
          Value lhs = block(b, rows, begin, count);
          Value matrix = expertMatrix(b, weight, e);
          Value out = zeroRows(b, acc, begin, count, outer);
          Value product =
              accumulateF32(b, lhs, dimsMap(ctx, 3, {0, 2}), matrix, weightMap,
                            dimsMap(ctx, 3, {0, 1}), iterators(2, 1), out);
          return {product, {begin, b.getIndexAttr(0)}, {count, outer}};
        });
  }

  /// dW[e, a, c] = Σ_i lhs[i, a] · rhs[i, c] over the sorted routes i of
  /// expert e; f32 [H·E, A, C] (0 for an expert no route picks).
  Value weightGrad(const Rows &lhs, const Rows &rhs) {
    MLIRContext *ctx = b.getContext();
    OpFoldResult a = sizesOf(b, lhs.value).back(),
                 c = sizesOf(b, rhs.value).back();
    if (tileRows > 0) {
      Value init = filled(b, {experts, a, c}, b.getF32Type(), 0.0);
      std::optional<KernelOperand> left = kernelOperand(lhs),
                                   right = kernelOperand(rhs);
      if (left && right)
        return moe::GroupedWeightGradOp::create(
                   b, TypeRange{init.getType()}, left->rows, right->rows,
                   segments, order, left->gates, right->gates, init,
                   b.getDenseI64ArrayAttr(
                       {left->routesPerRow, right->routesPerRow}))
            .getResult()[0];
      return moe::GroupedWeightGradOp::create(
                 b, TypeRange{init.getType()}, padded(lhs), padded(rhs),
                 segments, /*order=*/Value(), /*lhs_gates=*/Value(),
                 /*rhs_gates=*/Value(), init, DenseI64ArrayAttr())
          .getResult()[0];
    }
    Value init = tensor::EmptyOp::create(
        b, ArrayRef<OpFoldResult>{experts, a, c}, b.getF32Type());
    return overExperts(
        init,
        [&](ImplicitLocOpBuilder &b, Value e, Value begin, Value count,
            Value acc) -> ExpertPart {
          OpFoldResult one = b.getIndexAttr(1), origin = b.getIndexAttr(0);
          SmallVector<OpFoldResult> offsets{e, origin, origin},
              sizes{one, a, c}, strides{one, one, one};
          auto matrixType = RankedTensorType::get(
              {getConstantIntValue(a).value_or(ShapedType::kDynamic),
               getConstantIntValue(c).value_or(ShapedType::kDynamic)},
              b.getF32Type());
          Value slice = tensor::ExtractSliceOp::create(b, matrixType, acc,
                                                       offsets, sizes, strides);
          Value zero = linalg::FillOp::create(b, f32Constant(b, 0.0), slice)
                           .getResult(0);
          // (a, c | i)
          Value grad = accumulateF32(
              b, block(b, lhs, begin, count), dimsMap(ctx, 3, {2, 0}),
              block(b, rhs, begin, count), dimsMap(ctx, 3, {2, 1}),
              dimsMap(ctx, 3, {0, 1}), iterators(2, 1), zero);
          return {grad, offsets, sizes};
        });
  }

  /// The sum over the routes: out[n, h, w] = Σ_j g · rows[slot(n, h, j), w]
  /// with `perHead`, else out[n, w] = Σ_{h, j} g · rows[slot(n, h, j), w];
  /// g the route's gate if `gated`, else 1; f32.
  Value sumRoutes(Value rows, bool perHead, bool gated) {
    MLIRContext *ctx = b.getContext();
    OpFoldResult width = sizesOf(b, rows)[1];
    SmallVector<OpFoldResult> sizes{tokens, width};
    if (perHead)
      sizes.insert(sizes.begin() + 1, heads);
    // (n, h, w, j), h summed over too unless perHead.
    SmallVector<Value> inputs{slots};
    SmallVector<AffineMap> maps{dimsMap(ctx, 4, {0, 1, 3})};
    if (gated) {
      inputs.push_back(gates);
      maps.push_back(dimsMap(ctx, 4, {0, 1, 3}));
    }
    maps.push_back(perHead ? dimsMap(ctx, 4, {0, 1, 2})
                           : dimsMap(ctx, 4, {0, 2}));
    SmallVector<utils::IteratorType> types = iterators(3, 1);
    if (!perHead)
      types[1] = utils::IteratorType::reduction;
    return generic(b, inputs, filled(b, sizes, b.getF32Type(), 0.0), maps,
                   types,
                   [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                     Value v = tensor::ExtractOp::create(
                         b, rows, ValueRange{args[0], loopIndex(b, 2)});
                     if (gated)
                       v = arith::MulFOp::create(b, v, toF32(b, args[1]));
                     return arith::AddFOp::create(b, args.back(), v);
                   });
  }

  /// The gate gradients: dg[n, h, j] = Σ_w lhs[i, w] · rhs[i, w] at the
  /// route's sorted position i; f32 [N, H, k].
  Value routeDots(const Rows &lhsRows, const Rows &rhsRows) {
    MLIRContext *ctx = b.getContext();
    Value origin = indexConstant(b, 0);
    bool onDevice = tileRows > 0;
    if (onDevice && !lhsRows.sorted && rhsRows.sorted)
      return gatheredDots(lhsRows, rhsRows.value);
    Value lhs = onDevice ? padded(lhsRows) : block(b, lhsRows, origin, routes);
    Value rhs = onDevice ? padded(rhsRows) : block(b, rhsRows, origin, routes);
    Value dots = contractF32(b, lhs, dimsMap(ctx, 2, {0, 1}), rhs,
                             dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0}),
                             iterators(1, 1), {onDevice ? paddedRows : routes});
    AffineMap id = b.getMultiDimIdentityMap(3);
    Value init =
        tensor::EmptyOp::create(b, sizesOf(b, indices), b.getF32Type());
    return generic(b, {slots}, init, {id, id}, iterators(3),
                   [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                     return tensor::ExtractOp::create(b, dots, args[0]);
                   });
  }

private:
  /// A gathered operand of the grouped kernel ops: `rows` with one row per
  /// `routesPerRow` consecutive routes, and the routes' gates [R] or null.
  struct KernelOperand {
    Value rows;
    int64_t routesPerRow;
    Value gates;
  };

  /// `rows` as a gathered kernel operand: value [N, W] (H·k routes per
  /// row) or [N, H, W] collapsed to [N·H, W] (k per row), gates [N, H, k]
  /// collapsed to [R]; nullopt where H or k is dynamic, or `rows` is
  /// sorted.
  std::optional<KernelOperand> kernelOperand(const Rows &rows) {
    auto indexType = cast<RankedTensorType>(indices.getType());
    if (rows.sorted || indexType.isDynamicDim(1) || indexType.isDynamicDim(2))
      return std::nullopt;
    int64_t perToken = indexType.getDimSize(1) * indexType.getDimSize(2);
    KernelOperand operand{rows.value, perToken, Value()};
    if (cast<RankedTensorType>(rows.value.getType()).getRank() == 3) {
      operand.rows = tensor::CollapseShapeOp::create(
          b, rows.value, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
      operand.routesPerRow = indexType.getDimSize(2);
    }
    if (rows.gated)
      operand.gates = tensor::CollapseShapeOp::create(
          b, gates, ArrayRef<ReassociationIndices>{{0, 1, 2}});
    return operand;
  }

  /// dg[n, h, j] = Σ_w lhs(n, h, w) · sortedRows[slot(n, h, j), w], lhs
  /// read at the route itself (times its gate if gated): the padded rows
  /// of `sortedRows` [P, W] are read at the routes' positions only. f32
  /// [N, H, k].
  Value gatheredDots(const Rows &lhs, Value sortedRows) {
    MLIRContext *ctx = b.getContext();
    bool byHead = cast<RankedTensorType>(lhs.value.getType()).getRank() == 3;
    // (n, h, j, w | )
    SmallVector<Value> inputs{lhs.value, slots};
    SmallVector<AffineMap> maps{byHead ? dimsMap(ctx, 4, {0, 1, 3})
                                       : dimsMap(ctx, 4, {0, 3}),
                                dimsMap(ctx, 4, {0, 1, 2})};
    if (lhs.gated) {
      inputs.push_back(gates);
      maps.push_back(dimsMap(ctx, 4, {0, 1, 2}));
    }
    maps.push_back(dimsMap(ctx, 4, {0, 1, 2}));
    return generic(
        b, inputs, filled(b, sizesOf(b, indices), b.getF32Type(), 0.0), maps,
        iterators(3, 1),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value x = toF32(b, args[0]);
          if (lhs.gated)
            x = arith::MulFOp::create(b, x, toF32(b, args[2]));
          Value y = tensor::ExtractOp::create(
              b, sortedRows, ValueRange{args[1], loopIndex(b, 3)});
          return arith::AddFOp::create(
              b, args.back(), arith::MulFOp::create(b, x, toF32(b, y)));
        });
  }

  /// What one expert's iteration writes: `value` at `offsets` (of `sizes`,
  /// unit strides) in the loop's output, a part no other expert writes.
  struct ExpertPart {
    Value value;
    SmallVector<OpFoldResult> offsets, sizes;
  };
  using ExpertBody = function_ref<ExpertPart(
      ImplicitLocOpBuilder &, Value e, Value begin, Value count, Value out)>;

  /// A loop over the experts e writing into `init`, as an scf.forall (the
  /// experts are independent: the CPU runs them on all cores); `body` sees
  /// e's block of sorted routes [begin, begin + count) and the shared
  /// output.
  Value overExperts(Value init, ExpertBody body) {
    auto forall = scf::ForallOp::create(
        b, ArrayRef<OpFoldResult>{getAsOpFoldResult(experts)}, ValueRange{init},
        std::nullopt);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getTerminator());
    Value e = forall.getInductionVars()[0];
    Value begin = tensor::ExtractOp::create(b, offsets, e);
    Value next = arith::AddIOp::create(b, e, indexConstant(b, 1));
    Value end = tensor::ExtractOp::create(b, offsets, next);
    Value count = arith::SubIOp::create(b, end, begin);
    Value out = forall.getRegionIterArgs()[0];
    ExpertPart part = body(b, e, begin, count, out);
    SmallVector<OpFoldResult> strides(part.offsets.size(), b.getIndexAttr(1));
    b.setInsertionPointToStart(forall.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(b, part.value, out, part.offsets,
                                          part.sizes, strides);
    return forall.getResult(0);
  }

  /// rows[begin : begin + count, 0 : width].
  static Value rowBlock(ImplicitLocOpBuilder &b, Value rows, Value begin,
                        Value count, OpFoldResult width) {
    OpFoldResult one = b.getIndexAttr(1);
    return tensor::ExtractSliceOp::create(
        b, rows, ArrayRef<OpFoldResult>{begin, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{count, width}, ArrayRef<OpFoldResult>{one, one});
  }

  /// The same block of `acc`, zeroed.
  static Value zeroRows(ImplicitLocOpBuilder &b, Value acc, Value begin,
                        Value count, OpFoldResult width) {
    Value block = rowBlock(b, acc, begin, count, width);
    return linalg::FillOp::create(b, f32Constant(b, 0.0), block).getResult(0);
  }

  /// weight[e] as a matrix [A, B].
  static Value expertMatrix(ImplicitLocOpBuilder &b, Value weight, Value e) {
    auto type = cast<RankedTensorType>(weight.getType());
    SmallVector<OpFoldResult> sizes = sizesOf(b, weight);
    OpFoldResult one = b.getIndexAttr(1), origin = b.getIndexAttr(0);
    auto matrixType = RankedTensorType::get(
        {type.getDimSize(1), type.getDimSize(2)}, type.getElementType());
    return tensor::ExtractSliceOp::create(
        b, matrixType, weight, ArrayRef<OpFoldResult>{e, origin, origin},
        ArrayRef<OpFoldResult>{one, sizes[1], sizes[2]},
        ArrayRef<OpFoldResult>{one, one, one});
  }

  /// Route r's (n, h, j).
  std::tuple<Value, Value, Value> coordinates(ImplicitLocOpBuilder &b,
                                              Value r) const {
    Value j = arith::RemUIOp::create(b, r, choices);
    Value nh = arith::DivUIOp::create(b, r, choices);
    Value h = arith::RemUIOp::create(b, nh, heads);
    Value n = arith::DivUIOp::create(b, nh, heads);
    return {n, h, j};
  }

  /// Route r's expert h·E + indices[n, h, j].
  Value expertOf(ImplicitLocOpBuilder &b, Value n, Value h, Value j) const {
    Value chosen = tensor::ExtractOp::create(b, indices, ValueRange{n, h, j});
    return expertRow(b, h, perHead, chosen);
  }

  /// offsets [H·E + 1]: offsets[e] = #routes whose expert is below e, so
  /// expert e's block is [offsets[e], offsets[e + 1]); then a stable
  /// counting sort: `order` [R], the route at each sorted position, and
  /// `slots` [N, H, k], each route's sorted position.
  void sort() {
    MLIRContext *ctx = b.getContext();
    Value one = indexConstant(b, 1);
    Value bounds = arith::AddIOp::create(b, experts, one);
    // (e | n, h, j)
    offsets = generic(
        b, {indices}, filledIndex(b, {bounds}, 0),
        {dimsMap(ctx, 4, {1, 2, 3}), dimsMap(ctx, 4, {0})}, iterators(1, 3),
        [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
          Value expert = expertRow(b, loopIndex(b, 2), perHead, args[0]);
          Value below = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                              expert, loopIndex(b, 0));
          return arith::AddIOp::create(
              b, args[1],
              arith::SelectOp::create(b, below, one, indexConstant(b, 0)));
        });
    Value slotInit =
        tensor::EmptyOp::create(b, sizesOf(b, indices), b.getIndexType());
    Value orderInit = tensor::EmptyOp::create(b, ArrayRef<OpFoldResult>{routes},
                                              b.getIndexType());
    auto loop = scf::ForOp::create(
        b, indexConstant(b, 0), routes, one,
        ValueRange{offsets, slotInit, orderInit},
        [&](OpBuilder &nested, Location loc, Value r, ValueRange state) {
          ImplicitLocOpBuilder b(loc, nested);
          auto [n, h, j] = coordinates(b, r);
          Value expert = expertOf(b, n, h, j);
          Value position = tensor::ExtractOp::create(b, state[0], expert);
          Value next = arith::AddIOp::create(b, position, indexConstant(b, 1));
          Value cursor =
              tensor::InsertOp::create(b, next, state[0], ValueRange{expert});
          Value slot = tensor::InsertOp::create(b, position, state[1],
                                                ValueRange{n, h, j});
          Value order =
              tensor::InsertOp::create(b, r, state[2], ValueRange{position});
          scf::YieldOp::create(b, ValueRange{cursor, slot, order});
        });
    slots = loop.getResult(1);
    order = loop.getResult(2);
  }

  /// values[n, h, j] at each sorted position: f32 [R].
  Value gather(Value values) {
    AffineMap id = b.getMultiDimIdentityMap(1);
    Value init = tensor::EmptyOp::create(b, ArrayRef<OpFoldResult>{routes},
                                         b.getF32Type());
    return generic(b, {order}, init, {id, id}, iterators(1),
                   [&](ImplicitLocOpBuilder &b, ValueRange args) -> Value {
                     auto [n, h, j] = coordinates(b, args[0]);
                     return toF32(b, tensor::ExtractOp::create(
                                         b, values, ValueRange{n, h, j}));
                   });
  }

  /// The padded formulation's rows: `rows` scattered to their routes'
  /// sorted positions in a zero [P, W] f32 tensor (each route's row of
  /// `rows.value`, times its gate if gated), or the sorted rows themselves.
  /// One scf.forall over (n, h, j, w) that writes one element per
  /// iteration; scattered once per (value, gated).
  Value padded(const Rows &rows) {
    if (rows.sorted)
      return rows.value;
    Value &cached = scattered[{rows.value, rows.gated ? 1u : 0u}];
    if (cached)
      return cached;
    OpFoldResult width = sizesOf(b, rows.value).back();
    bool byHead = cast<RankedTensorType>(rows.value.getType()).getRank() == 3;
    Value init = filled(b, {paddedRows, width}, b.getF32Type(), 0.0);
    SmallVector<OpFoldResult> bounds{tokens, heads, choices, width};
    auto forall =
        scf::ForallOp::create(b, bounds, ValueRange{init}, std::nullopt);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getTerminator());
    SmallVector<Value> ivs = forall.getInductionVars();
    Value n = ivs[0], h = ivs[1], j = ivs[2], w = ivs[3];
    Value slot = tensor::ExtractOp::create(b, slots, ValueRange{n, h, j});
    SmallVector<Value> at{n};
    if (byHead)
      at.push_back(h);
    at.push_back(w);
    Value v = toF32(b, tensor::ExtractOp::create(b, rows.value, at));
    if (rows.gated)
      v = arith::MulFOp::create(
          b, v,
          toF32(b, tensor::ExtractOp::create(b, gates, ValueRange{n, h, j})));
    Value out = forall.getRegionIterArgs()[0];
    OpFoldResult one = b.getIndexAttr(1);
    SmallVector<OpFoldResult> offsets{slot, w}, sizes{one, one},
        strides{one, one};
    Value slice =
        tensor::ExtractSliceOp::create(b, out, offsets, sizes, strides);
    Value zero = indexConstant(b, 0);
    Value written =
        tensor::InsertOp::create(b, v, slice, ValueRange{zero, zero});
    b.setInsertionPointToStart(forall.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(b, written, out, offsets, sizes,
                                          strides);
    cached = forall.getResult(0);
    return cached;
  }

  /// The sort without host reads (moe.sort_routes): each expert's
  /// segment padded to a multiple of T rows and starting at one, the
  /// route at each position (R at the padding), each route's position and
  /// each tile's expert. P = (ceil(R / T) + E) · T rows bound every
  /// segment.
  void sortPadded() {
    Type index = b.getIndexType();
    Value one = indexConstant(b, 1), tile = indexConstant(b, tileRows);
    Value bounds = arith::AddIOp::create(b, experts, one);
    Value tiles = arith::AddIOp::create(
        b, arith::CeilDivUIOp::create(b, routes, tile), experts);
    paddedRows = arith::MulIOp::create(b, tiles, tile);
    auto empty = [&](ArrayRef<OpFoldResult> sizes) -> Value {
      return tensor::EmptyOp::create(b, sizes, index);
    };
    SmallVector<Value> inits{empty({bounds}), empty({paddedRows}),
                             empty(sizesOf(b, indices)), empty({tiles})};
    auto sort = moe::SortRoutesOp::create(
        b, ValueRange(inits).getTypes(), indices, inits[0], inits[1], inits[2],
        inits[3], b.getI64IntegerAttr(*staticExpertsPerHead),
        b.getI64IntegerAttr(tileRows));
    segments = sort.getResult(0);
    order = sort.getResult(1);
    slots = sort.getResult(2);
    tileExperts = sort.getResult(3);
  }

  ImplicitLocOpBuilder &b;
  Value gates, indices;
  int64_t tileRows;
  std::optional<int64_t> staticExpertsPerHead;
  Value tokens, heads, choices, perHead, experts, routes;
  Value offsets, slots, order, routeGates;
  // The padded formulation's sort and rows.
  Value segments, tileExperts, paddedRows;
  llvm::DenseMap<std::pair<Value, unsigned>, Value> scattered;
};

/// A grouped pattern: above the dense formulation's (benefit 2), with the
/// formulation's tile (0: the host formulation). It sorts the op's routes
/// and replaces the op with what `lower` builds from them, in the op's
/// result types.
template <typename OpTy> struct GroupedPattern : public OpRewritePattern<OpTy> {
  GroupedPattern(MLIRContext *ctx, int64_t tileRows)
      : OpRewritePattern<OpTy>(ctx, /*benefit=*/2), tileRows(tileRows) {}
  int64_t tileRows;

  /// The op's results in f32, one per result.
  virtual SmallVector<Value> lower(OpTy op, SortedRoutes &routes) const = 0;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const final {
    // The sort without host reads needs static heads and expert rows (other
    // ops are left to the other patterns).
    if (tileRows > 0 &&
        !SortedRoutes::expertsPerHeadOf(op.getIndices(), op.getWeight()))
      return rewriter.notifyMatchFailure(op, "dynamic heads or expert rows");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    SortedRoutes routes(b, op.getGates(), op.getIndices(), op.getWeight(),
                        tileRows);
    SmallVector<Value> results;
    for (auto [value, result] :
         llvm::zip_equal(lower(op, routes), op->getResults()))
      results.push_back(finish(b, value, result));
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// out[n, h, f] = Σ_j g · (x[n] · W[h·E + indices[n, h, j]])[f]
/// (moe.expert_proj, or moe.fused_expert_proj: the same operands).
template <typename OpTy>
struct GroupedExpertProj : public GroupedPattern<OpTy> {
  using GroupedPattern<OpTy>::GroupedPattern;

  SmallVector<Value> lower(OpTy op, SortedRoutes &routes) const override {
    Value w = op.getWeight();
    Value products = routes.perExpert(
        SortedRoutes::gathered(op.getInput(), false), w, false);
    return {routes.sumRoutes(products, /*perHead=*/true, /*gated=*/true)};
  }
};

/// y[n, o] = Σ_{h, j} (g · heads[n, h] · W[h·E + indices[n, h, j]])[o]
/// (moe.expert_merge or moe.fused_expert_merge).
template <typename OpTy>
struct GroupedExpertMerge : public GroupedPattern<OpTy> {
  using GroupedPattern<OpTy>::GroupedPattern;

  SmallVector<Value> lower(OpTy op, SortedRoutes &routes) const override {
    Value w = op.getWeight();
    Value products =
        routes.perExpert(SortedRoutes::gathered(op.getHeads(), true), w, false);
    return {routes.sumRoutes(products, /*perHead=*/false, /*gated=*/false)};
  }
};

/// With rows X (x by route), dO (dout by route) and dXu = dO · W[e]ᵀ per
/// route (ungated: each route's input adjoint over its gate):
///   dx = Σ_routes g · dXu, dW[e] = Xᵀ · (g · dO) over e's routes,
///   dg = <dO, X · W[e]> = <X, dXu> per route,
/// two matmuls per expert (the forward's product is not recomputed).
template <typename OpTy>
struct GroupedExpertProjGrad : public GroupedPattern<OpTy> {
  using GroupedPattern<OpTy>::GroupedPattern;

  SmallVector<Value> lower(OpTy op, SortedRoutes &routes) const override {
    Value w = op.getWeight();
    auto x = SortedRoutes::gathered(op.getInput(), false);
    Value dinput = routes.perExpert(
        SortedRoutes::gathered(op.getResultGrad(), false), w, true);
    Value dx = routes.sumRoutes(dinput, /*perHead=*/false, /*gated=*/true);
    Value dw =
        routes.weightGrad(x, SortedRoutes::gathered(op.getResultGrad(), true));
    Value dg = routes.routeDots(x, SortedRoutes::sorted(dinput));
    return {dx, dw, dg};
  }
};

/// With rows A (heads by route), gA (gated) and dY (dy by route), and
/// dA = dY · W[e]ᵀ per route:
///   dheads = Σ_j g · dA, dW[e] = gAᵀ · dY over e's routes, dg = <A, dA>.
template <typename OpTy>
struct GroupedExpertMergeGrad : public GroupedPattern<OpTy> {
  using GroupedPattern<OpTy>::GroupedPattern;

  SmallVector<Value> lower(OpTy op, SortedRoutes &routes) const override {
    Value w = op.getWeight();
    auto heads = SortedRoutes::gathered(op.getHeads(), false);
    auto gatedHeads = SortedRoutes::gathered(op.getHeads(), true);
    auto dy = SortedRoutes::gathered(op.getResultGrad(), false);
    Value dheadRows = routes.perExpert(dy, w, true);
    return {routes.sumRoutes(dheadRows, /*perHead=*/true, /*gated=*/true),
            routes.weightGrad(gatedHeads, dy),
            routes.routeDots(heads, SortedRoutes::sorted(dheadRows))};
  }
};

/// The grouped patterns of one family of expert ops (plain or fused).
template <typename ProjOp, typename MergeOp, typename ProjGradOp,
          typename MergeGradOp>
void addGroupedPatterns(RewritePatternSet &patterns, int64_t tileRows) {
  patterns.add<GroupedExpertProj<ProjOp>, GroupedExpertMerge<MergeOp>,
               GroupedExpertProjGrad<ProjGradOp>,
               GroupedExpertMergeGrad<MergeGradOp>>(patterns.getContext(),
                                                    tileRows);
}

} // namespace

void mlir::switchyard::populateGroupedExpertPatterns(
    RewritePatternSet &patterns, int64_t tileRows) {
  // Above the dense formulation's patterns, which stay for what these leave.
  addGroupedPatterns<moe::ExpertProjOp, moe::ExpertMergeOp,
                     moe::ExpertProjGradOp, moe::ExpertMergeGradOp>(patterns,
                                                                    tileRows);
}

void mlir::switchyard::populateFusedGroupedExpertPatterns(
    RewritePatternSet &patterns, int64_t tileRows) {
  // Above the row kernels (FusedKernels.cpp), which stay for the ops with
  // dynamic heads or expert rows.
  addGroupedPatterns<moe::FusedExpertProjOp, moe::FusedExpertMergeOp,
                     moe::FusedExpertProjGradOp, moe::FusedExpertMergeGradOp>(
      patterns, tileRows);
}

//===- CpuGroupedKernels.cpp - register-blocked grouped expert kernels ----===//
//
// Implements `switchyard-cpu-grouped-kernels` (see Passes.td): the grouped
// expert ops on buffers become register-blocked vector kernels whose
// gathered operands are read by route while they are packed.
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Codegen/CPU/Passes.h"
#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/Common/GroupedOperands.h"
#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDCPUGROUPEDKERNELSPASS
#include "lib/Codegen/CPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-cpu-grouped-kernels"

using namespace mlir;
using switchyard::GroupedOperand;

namespace {

/// The column blocks of a row `width` long: full blocks of `columns`, in
/// bounds, up to `tailStart`, then one block of `tailColumns` (half as wide
/// where the rest is at most half a block: 76 with 32 columns is 32, 32,
/// then 16), masked unless it ends exactly at the row's end. A dynamic
/// width is all masked blocks.
struct ColumnBlocks {
  int64_t columns;
  int64_t tailStart = -1, tailColumns = 0;
  bool tailInBounds = false;

  ColumnBlocks(int64_t width, int64_t columns) : columns(columns) {
    if (ShapedType::isDynamic(width))
      return;
    int64_t tail = width % columns;
    tailStart = width - tail;
    if (tail == 0)
      return;
    tailColumns =
        columns % 2 == 0 && tail <= columns / 2 ? columns / 2 : columns;
    tailInBounds = tail == tailColumns;
  }
};

/// Builds the kernel of one grouped op at the builder's insertion point.
class GroupedKernelBuilder {
public:
  GroupedKernelBuilder(ImplicitLocOpBuilder &b, int64_t rows, int64_t columns,
                       int64_t panelBytes)
      : b(b), rows(rows), columns(columns), panelBytes(panelBytes) {}

  void build(moe::GroupedMatmulOp op);
  void build(moe::GroupedWeightGradOp op);

private:
  Value cst(int64_t value) { return arith::ConstantIndexOp::create(b, value); }
  Value dim(Value buffer, int64_t d) {
    return memref::DimOp::create(b, buffer, d);
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, x, y); }

  /// A loop from `lb` to `ub` by `step`; `parallel` marks it for the
  /// compute threads (switchyard-cpu-outline-loops).
  void loop(Value lb, Value ub, Value step, function_ref<void(Value)> body,
            bool parallel = false) {
    auto forOp = scf::ForOp::create(b, lb, ub, step);
    if (parallel)
      forOp->setAttr(switchyard::kParallelLoopAttr, b.getUnitAttr());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    body(forOp.getInductionVar());
  }

  /// `value` (a scalar or vector) as f32.
  Value toF32(Value value) {
    Type element = getElementTypeOrSelf(value.getType());
    if (element.isF32())
      return value;
    Type f32 = b.getF32Type();
    if (auto vector = dyn_cast<VectorType>(value.getType()))
      f32 = vector.clone(f32);
    return arith::ExtFOp::create(b, f32, value);
  }

  /// panel[i, 0 : width] = the padded row `first + i` of `operand` (as its
  /// kernels read it: gathered by route, gated, zero at padding) for i in
  /// [0, count): the gather while packing.
  void pack(const GroupedOperand &operand, Value first, Value count,
            Value width, Value panel) {
    loop(cst(0), count, cst(1), [&](Value i) {
      GroupedOperand::Row row = operand.row(b, b.getLoc(), add(first, i));
      loop(cst(0), width, cst(1), [&](Value a) {
        Value raw = memref::LoadOp::create(b, operand.buffer(),
                                           ValueRange{row.index, a});
        Value value = toF32(operand.scale(b, b.getLoc(), row, raw));
        memref::StoreOp::create(b, value, panel, ValueRange{i, a});
      });
    });
  }

  /// The tiles of `rowCount` (static) output rows from `firstRow` over the
  /// column blocks of [0, width): each accumulates `steps` reduction steps
  /// in registers, starting from `out` (from zeros if `zeroStart`) and
  /// ending in it at (prefix..., firstRow + r, column); `scalar(r, k)` is
  /// row r's factor at step k and
  /// `vectorAt(k, column, width, inBounds)` the step's row of the other
  /// factor at the block of `width` columns from `column`.
  using ScalarFn = function_ref<Value(int64_t r, Value k)>;
  using VectorFn =
      function_ref<Value(Value k, Value column, int64_t width, bool inBounds)>;
  void accumulateTiles(int64_t rowCount, Value out, ValueRange prefix,
                       Value firstRow, Value width, Value steps,
                       const ColumnBlocks &blocks, bool zeroStart,
                       ScalarFn scalar, VectorFn vectorAt) {
    auto block = [&](Value column, int64_t blockWidth, bool inBounds) {
      auto type = VectorType::get({blockWidth}, b.getF32Type());
      Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f));
      auto at = [&](int64_t r) {
        SmallVector<Value> indices(prefix);
        indices.push_back(r == 0 ? firstRow : add(firstRow, cst(r)));
        indices.push_back(column);
        return indices;
      };
      SmallVector<Value> acc;
      Value zeros = arith::ConstantOp::create(
          b, type, DenseElementsAttr::get(type, 0.0f));
      for (int64_t r = 0; r < rowCount; ++r)
        acc.push_back(
            zeroStart ? zeros
                      : vector::TransferReadOp::create(
                            b, type, out, at(r), zero, ArrayRef<bool>{inBounds})
                            .getResult());
      auto forOp = scf::ForOp::create(b, cst(0), steps, cst(1), acc);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(forOp.getBody());
        Value k = forOp.getInductionVar();
        Value other = vectorAt(k, column, blockWidth, inBounds);
        SmallVector<Value> next;
        for (int64_t r = 0; r < rowCount; ++r) {
          Value splat = vector::BroadcastOp::create(b, type, scalar(r, k));
          next.push_back(vector::FMAOp::create(b, splat, other,
                                               forOp.getRegionIterArgs()[r]));
        }
        scf::YieldOp::create(b, next);
      }
      for (int64_t r = 0; r < rowCount; ++r)
        vector::TransferWriteOp::create(b, forOp.getResult(r), out, at(r),
                                        ArrayRef<bool>{inBounds});
    };
    if (blocks.tailStart < 0) {
      loop(cst(0), width, cst(columns),
           [&](Value column) { block(column, columns, /*inBounds=*/false); });
      return;
    }
    Value tailStart = cst(blocks.tailStart);
    loop(cst(0), tailStart, cst(columns),
         [&](Value column) { block(column, columns, /*inBounds=*/true); });
    if (blocks.tailColumns > 0)
      block(tailStart, blocks.tailColumns, blocks.tailInBounds);
  }

  /// The register tiles of `count` output rows from 0 (`dynamicCount`
  /// where the count is dynamic): a loop over full tiles of `rows`, then
  /// the rest in one tile where the count is static, else row by row.
  void rowTiles(int64_t count, Value dynamicCount,
                function_ref<void(Value first, int64_t tileRows)> body) {
    if (!ShapedType::isDynamic(count)) {
      int64_t full = count - count % rows;
      if (full == rows)
        body(cst(0), rows);
      else if (full > 0)
        loop(cst(0), cst(full), cst(rows),
             [&](Value first) { body(first, rows); });
      if (full < count)
        body(cst(full), count - full);
      return;
    }
    Value full = arith::SubIOp::create(
        b, dynamicCount, arith::RemUIOp::create(b, dynamicCount, cst(rows)));
    loop(cst(0), full, cst(rows), [&](Value first) { body(first, rows); });
    loop(full, dynamicCount, cst(1), [&](Value first) { body(first, 1); });
  }

  /// A stack save before `body` and a restore after: the panels it
  /// allocates are freed at the end of each iteration of the loop around.
  void withStack(function_ref<void()> body) {
    Value stack = LLVM::StackSaveOp::create(
        b, LLVM::LLVMPointerType::get(b.getContext()));
    body();
    LLVM::StackRestoreOp::create(b, stack);
  }

  ImplicitLocOpBuilder &b;
  int64_t rows, columns, panelBytes;
};

void GroupedKernelBuilder::build(moe::GroupedMatmulOp op) {
  GroupedOperand operand = GroupedOperand::rows(op);
  Value weight = op.getWeight(), out = op.getInit(),
        tileExperts = op.getTileExperts();
  auto weightType = cast<MemRefType>(weight.getType());
  int64_t tileSize = op.getTileSize();
  Value experts = dim(weight, 0), width = dim(operand.buffer(), 1),
        outWidth = dim(out, 1);
  // [E, A, C], C unit-stride: the transposed weight copied once.
  Value transposed;
  if (op.getTransposeWeight()) {
    SmallVector<int64_t> shape{weightType.getDimSize(0),
                               weightType.getDimSize(2),
                               weightType.getDimSize(1)};
    SmallVector<Value> dynamic;
    for (int64_t d : {0, 2, 1})
      if (weightType.isDynamicDim(d))
        dynamic.push_back(dim(weight, d));
    transposed = memref::AllocOp::create(
        b, MemRefType::get(shape, weightType.getElementType()), dynamic,
        b.getI64IntegerAttr(64));
    linalg::TransposeOp::create(b, weight, transposed,
                                ArrayRef<int64_t>{0, 2, 1});
    weight = transposed;
  }
  // The zeros a fill wrote before the op: the tiles start from zero
  // vectors instead of reading them back (one pass over [P, C] less), and
  // the padding tiles, which no tile writes, are zeroed.
  linalg::FillOp zeroFill = switchyard::precedingZeroFill(
      cast<DestinationStyleOpInterface>(op.getOperation()));
  if (zeroFill)
    zeroFill->erase();
  ColumnBlocks blocks(cast<MemRefType>(out.getType()).getDimSize(1), columns);
  int64_t aWidth = cast<MemRefType>(operand.buffer().getType()).getDimSize(1);
  Value tiles =
      arith::DivUIOp::create(b, dim(op.getPaddedRows(), 0), cst(tileSize));
  loop(
      cst(0), tiles, cst(1),
      [&](Value t) {
        Value e = memref::LoadOp::create(b, tileExperts, t);
        Value valid =
            arith::CmpIOp::create(b, arith::CmpIPredicate::ult, e, experts);
        Value first = mul(t, cst(tileSize));
        auto ifValid = scf::IfOp::create(b, valid, /*withElseRegion=*/zeroFill);
        OpBuilder::InsertionGuard guard(b);
        if (zeroFill) {
          b.setInsertionPointToStart(ifValid.elseBlock());
          OpFoldResult one = b.getIndexAttr(1);
          Value rowsOfTile = memref::SubViewOp::create(
              b, out, ArrayRef<OpFoldResult>{first, b.getIndexAttr(0)},
              ArrayRef<OpFoldResult>{b.getIndexAttr(tileSize), outWidth},
              ArrayRef<OpFoldResult>{one, one});
          Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f));
          linalg::FillOp::create(b, ValueRange{zero}, ValueRange{rowsOfTile});
        }
        b.setInsertionPointToStart(ifValid.thenBlock());
        withStack([&] {
          auto panelType = MemRefType::get({tileSize, aWidth}, b.getF32Type());
          SmallVector<Value> panelSizes;
          if (ShapedType::isDynamic(aWidth))
            panelSizes.push_back(width);
          Value panel = memref::AllocaOp::create(b, panelType, panelSizes,
                                                 b.getI64IntegerAttr(64));
          pack(operand, first, cst(tileSize), width, panel);
          Type weightElement = weightType.getElementType();
          Value padding = arith::ConstantOp::create(
              b, weightElement, b.getZeroAttr(weightElement));
          rowTiles(tileSize, Value(), [&](Value r0, int64_t tileRows) {
            accumulateTiles(
                tileRows, out, {}, add(first, r0), outWidth, width, blocks,
                /*zeroStart=*/bool(zeroFill),
                [&](int64_t r, Value k) -> Value {
                  return memref::LoadOp::create(b, panel,
                                                ValueRange{add(r0, cst(r)), k});
                },
                [&](Value k, Value column, int64_t blockWidth,
                    bool inBounds) -> Value {
                  return toF32(vector::TransferReadOp::create(
                      b, VectorType::get({blockWidth}, weightElement), weight,
                      ValueRange{e, k, column}, padding,
                      ArrayRef<bool>{inBounds}));
                });
          });
        });
      },
      /*parallel=*/true);
  if (transposed)
    memref::DeallocOp::create(b, transposed);
}

void GroupedKernelBuilder::build(moe::GroupedWeightGradOp op) {
  GroupedOperand lhs = GroupedOperand::lhs(op), rhs = GroupedOperand::rhs(op);
  Value out = op.getInit(), segments = op.getSegments();
  auto outType = cast<MemRefType>(out.getType());
  int64_t lhsWidth = outType.getDimSize(1), rhsWidth = outType.getDimSize(2);
  Value aSize = dim(out, 1), cSize = dim(out, 2);
  // Routes per chunk: both operands' rows within the panel budget (f32),
  // the right one's rounded up to whole blocks (read in bounds, the lanes
  // past the end unused).
  int64_t rhsPanelWidth = ShapedType::isDynamic(rhsWidth)
                              ? ShapedType::kDynamic
                              : llvm::divideCeil(rhsWidth, columns) * columns;
  int64_t chunk = 64;
  if (!ShapedType::isDynamic(lhsWidth) && !ShapedType::isDynamic(rhsWidth))
    chunk = std::clamp<int64_t>(panelBytes / ((lhsWidth + rhsPanelWidth) * 4),
                                8, 512);
  ColumnBlocks blocks(rhsWidth, columns);
  loop(
      cst(0), dim(out, 0), cst(1),
      [&](Value e) {
        Value lo = memref::LoadOp::create(b, segments, e);
        Value hi = memref::LoadOp::create(b, segments, add(e, cst(1)));
        withStack([&] {
          auto panelOf = [&](int64_t width, Value dynamicWidth) -> Value {
            SmallVector<Value> sizes;
            if (ShapedType::isDynamic(width))
              sizes.push_back(dynamicWidth);
            return memref::AllocaOp::create(
                b, MemRefType::get({chunk, width}, b.getF32Type()), sizes,
                b.getI64IntegerAttr(64));
          };
          Value rhsPanelColumns = arith::MulIOp::create(
              b, arith::CeilDivUIOp::create(b, cSize, cst(columns)),
              cst(columns));
          Value lhsPanel = panelOf(lhsWidth, aSize);
          Value rhsPanel = panelOf(rhsPanelWidth, rhsPanelColumns);
          loop(lo, hi, cst(chunk), [&](Value p0) {
            Value count = arith::MinUIOp::create(
                b, cst(chunk), arith::SubIOp::create(b, hi, p0));
            pack(lhs, p0, count, aSize, lhsPanel);
            pack(rhs, p0, count, cSize, rhsPanel);
            rowTiles(lhsWidth, aSize, [&](Value a0, int64_t tileRows) {
              accumulateTiles(
                  tileRows, out, {e}, a0, cSize, count, blocks,
                  /*zeroStart=*/false,
                  [&](int64_t r, Value i) -> Value {
                    return memref::LoadOp::create(
                        b, lhsPanel, ValueRange{i, add(a0, cst(r))});
                  },
                  [&](Value i, Value column, int64_t blockWidth,
                      bool) -> Value {
                    Value zero =
                        arith::ConstantOp::create(b, b.getF32FloatAttr(0));
                    return vector::TransferReadOp::create(
                        b, VectorType::get({blockWidth}, b.getF32Type()),
                        rhsPanel, ValueRange{i, column}, zero,
                        ArrayRef<bool>{true});
                  });
            });
          });
        });
      },
      /*parallel=*/true);
}

struct SwitchyardCpuGroupedKernelsPass
    : public switchyard::impl::SwitchyardCpuGroupedKernelsPassBase<
          SwitchyardCpuGroupedKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (rows < 1 || columns < 1 || panelKiB < 1) {
      getOperation().emitError()
          << "rows, columns and panel-kib must be positive";
      return signalPassFailure();
    }
    SmallVector<Operation *> kernels;
    getOperation().walk([&](Operation *op) {
      if (isa<moe::GroupedMatmulOp, moe::GroupedWeightGradOp>(op))
        kernels.push_back(op);
    });
    for (Operation *op : kernels) {
      if (op->getNumResults() != 0) {
        op->emitOpError() << "switchyard-cpu-grouped-kernels runs after "
                             "bufferization: expected buffer operands";
        return signalPassFailure();
      }
      LLVM_DEBUG(llvm::dbgs() << "register-blocked kernel for " << op->getName()
                              << " at " << op->getLoc() << "\n");
      ImplicitLocOpBuilder b(op->getLoc(), op);
      GroupedKernelBuilder builder(b, rows, columns, panelKiB * 1024);
      if (auto matmul = dyn_cast<moe::GroupedMatmulOp>(op))
        builder.build(matmul);
      else
        builder.build(cast<moe::GroupedWeightGradOp>(op));
      op->erase();
    }
  }
};

} // namespace

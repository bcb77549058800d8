//===- GroupedKernels.cpp - the grouped expert kernels on mma.sync --------===//
//
// The MmaProblems of the grouped expert kernels on buffers, which
// switchyard-gpu-tensor-core-matmul builds with the mma.sync matmul kernel
// (MmaSync.cpp): moe.grouped_matmul, whose 64-row blocks each read their
// tile's expert from tile_experts and that expert's weight as B (a padding
// tile's blocks run no K step and store nothing), and
// moe.grouped_weight_grad, with a batch per expert and K over the expert's
// segment of rows (split into parts where the grid is small). Gathered
// operands are read by route while staging (GroupedOperand): the sorted
// rows never exist in memory.
//
//===----------------------------------------------------------------------===//

#include "TensorCoreKernels.h"

#include "lib/Codegen/Common/GroupedOperands.h"

#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

using namespace mlir::switchyard::tensor_cores;

namespace {
/// An operand read as it is stored (no casts), with the staging's runs
/// along its last dimension: `indices` of (batch, row, k).
MmaProblem::Operand
plainOperand(Value buffer,
             std::function<SmallVector<Value>(Value, Value, Value)> indices) {
  MmaProblem::Operand operand;
  operand.buffer = buffer;
  operand.indices = [indices](OpBuilder &, Value batch, Value row, Value k) {
    return indices(batch, row, k);
  };
  operand.cast = [](OpBuilder &, Value raw) { return raw; };
  operand.runsInLastDim = true;
  return operand;
}

/// A grouped operand (GroupedOperand) as an operand of the mma.sync
/// problem: read as it is stored, or gathered by route with its gate and
/// padding applied before the rounding; `positionIsK` where the padded
/// position is the problem's k (a weight gradient's), else its row. The
/// staging's runs lie along the buffer's last dimension, whose elements
/// share the position.
MmaProblem::Operand groupedOperand(const switchyard::GroupedOperand &grouped,
                                   Location loc, bool positionIsK) {
  auto split = [positionIsK](Value row, Value k) {
    return positionIsK ? std::make_pair(k, row) : std::make_pair(row, k);
  };
  // Its indices build the route's row, so they need the builder.
  MmaProblem::Operand operand = plainOperand(grouped.buffer(), nullptr);
  operand.indices = [=](OpBuilder &b, Value, Value row, Value k) {
    auto [p, column] = split(row, k);
    return SmallVector<Value>{grouped.row(b, loc, p).index, column};
  };
  if (grouped.gathered())
    operand.scale = [=](OpBuilder &b, Value, Value row, Value k,
                        Value factor) {
      return grouped.scale(b, loc, grouped.row(b, loc, split(row, k).first),
                           factor);
    };
  return operand;
}

/// The mma.sync problem of moe.grouped_matmul: C = init [P, C], M the
/// padded rows, N the output width, K the reduced width. Each block's
/// kBlockM rows lie in one tile of tile_size rows (a multiple of kBlockM;
/// other sizes stay for switchyard-lower-grouped-kernels) and it reads its
/// expert's weight; a padding tile's blocks are inactive. `expert` holds
/// the block's expert once kRange has built it.
MmaProblem groupedMatmulProblem(RewriterBase &rewriter, moe::GroupedMatmulOp op,
                                Value &expert) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  auto dim = [&](Value v, int64_t d) -> Value {
    return memref::DimOp::create(rewriter, loc, v, d);
  };
  auto rows = switchyard::GroupedOperand::rows(op);
  Value weight = op.getWeight(), tiles = op.getTileExperts();
  bool transposed = op.getTransposeWeight();
  int64_t tileSize = op.getTileSize();
  Value experts = dim(weight, 0), width = dim(rows.buffer(), 1);
  MmaProblem problem;
  problem.sizeM = dim(op.getPaddedRows(), 0);
  problem.sizeN = dim(op.getInit(), 1);
  problem.batches = arith::ConstantIndexOp::create(rewriter, loc, 1);
  problem.kRange = [=, &expert](OpBuilder &b, Value, Value m0) {
    Value tile = arith::DivUIOp::create(
        b, loc, m0, arith::ConstantIndexOp::create(b, loc, tileSize));
    expert = memref::LoadOp::create(b, loc, tiles, tile);
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         expert, experts);
    return MmaProblem::Range{arith::ConstantIndexOp::create(b, loc, 0), width,
                             active};
  };
  problem.operandA = groupedOperand(rows, loc, /*positionIsK=*/false);
  problem.operandB =
      plainOperand(weight, [=, &expert](Value, Value n, Value k) {
        return transposed ? SmallVector<Value>{expert, n, k}
                          : SmallVector<Value>{expert, k, n};
      });
  problem.rowsContiguousB = !transposed;
  problem.out = op.getInit();
  problem.outIndices = [](OpBuilder &, Value, Value m, Value n) {
    return SmallVector<Value>{m, n};
  };
  return problem;
}

/// The mma.sync problem of moe.grouped_weight_grad: one batch per expert e,
/// C = init[e] [A, C], K over e's segment of rows.
MmaProblem groupedWeightGradProblem(RewriterBase &rewriter,
                                    moe::GroupedWeightGradOp op,
                                    const SplitKPolicy &policy) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  auto dim = [&](Value v, int64_t d) -> Value {
    return memref::DimOp::create(rewriter, loc, v, d);
  };
  Value segments = op.getSegments();
  MmaProblem problem;
  problem.sizeM = dim(op.getInit(), 1);
  problem.sizeN = dim(op.getInit(), 2);
  problem.batches = dim(op.getInit(), 0);
  // The sizes of init (the weights' shape) are static in practice; each
  // expert's K is its segment, about the rows over the experts.
  auto initType = cast<MemRefType>(op.getInit().getType());
  if (initType.hasStaticShape() && initType.getDimSize(0) > 0) {
    int64_t experts = initType.getDimSize(0);
    problem.splits = splitCount(
        rewriter, loc, policy, initType.getDimSize(1), initType.getDimSize(2),
        experts, [&]() -> Value {
          return arith::DivUIOp::create(
              rewriter, loc, dim(op.getPaddedRows(), 0),
              arith::ConstantIndexOp::create(rewriter, loc, experts));
        });
  }
  problem.kRange = [=](OpBuilder &b, Value e, Value) {
    Value next = arith::AddIOp::create(
        b, loc, e, arith::ConstantIndexOp::create(b, loc, 1));
    return MmaProblem::Range{
        memref::LoadOp::create(b, loc, segments, e),
        memref::LoadOp::create(b, loc, segments, next),
        arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1)};
  };
  problem.operandA = groupedOperand(switchyard::GroupedOperand::lhs(op), loc,
                                    /*positionIsK=*/true);
  problem.operandB = groupedOperand(switchyard::GroupedOperand::rhs(op), loc,
                                    /*positionIsK=*/true);
  // K (the rows p) is the outer dimension of both.
  problem.rowsContiguousA = problem.rowsContiguousB = true;
  problem.out = op.getInit();
  problem.outIndices = [](OpBuilder &, Value e, Value a, Value c) {
    return SmallVector<Value>{e, a, c};
  };
  return problem;
}
} // namespace

void mlir::switchyard::tensor_cores::buildGroupedKernel(
    RewriterBase &rewriter, Operation *op, FloatType elementType,
    const SplitKPolicy &policy) {
  // The grouped matmul's kRange sets `expert` and its operand B reads it:
  // it lives until the kernel is built.
  Value expert;
  MmaProblem problem =
      isa<moe::GroupedMatmulOp>(op)
          ? groupedMatmulProblem(rewriter, cast<moe::GroupedMatmulOp>(op),
                                 expert)
          : groupedWeightGradProblem(
                rewriter, cast<moe::GroupedWeightGradOp>(op), policy);
  buildMmaKernel(rewriter, op, elementType, problem);
}

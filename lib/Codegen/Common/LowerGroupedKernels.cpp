//===- LowerGroupedKernels.cpp - grouped expert kernels as loops ----------===//
//
// Implements `switchyard-lower-grouped-kernels`: moe.grouped_matmul and
// moe.grouped_weight_grad on buffers become an scf.parallel over their
// outputs with a sequential reduction in each iteration, the code shape of
// the SIMT route (one GPU thread per output element) and of the CPU's
// loops. The factors are rounded to `element-type` as the tensor cores
// would see them, the SIMT counterpart of the tensor-core kernels that
// `switchyard-gpu-tensor-core-matmul` builds for the same ops; gathered
// operands are read through GroupedOperand, as those kernels read them.
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/Common/GroupedOperands.h"
#include "lib/Codegen/Common/Passes.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/Debug.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDLOWERGROUPEDKERNELSPASS
#include "lib/Codegen/Common/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-lower-grouped-kernels"

using namespace mlir;

namespace {
/// Builds the loops of one grouped kernel.
class LoopBuilder {
public:
  LoopBuilder(ImplicitLocOpBuilder &b, FloatType rounding)
      : b(b), rounding(rounding) {}

  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value dim(Value buffer, int64_t d) {
    return memref::DimOp::create(b, buffer, d);
  }

  /// `value` as f32, rounded to the element type first where one is set.
  Value factor(Value value) {
    Type f32 = b.getF32Type();
    if (value.getType() != f32)
      value = arith::ExtFOp::create(b, f32, value);
    return rounding ? switchyard::roundThrough(b, b.getLoc(), value, rounding)
                    : value;
  }

  /// init[out] + Σ_{k in [lo, hi)} lhs(k) · rhs(k), stored back.
  void accumulate(Value init, ValueRange out, Value lo, Value hi,
                  function_ref<std::pair<Value, Value>(Value k)> factors) {
    Value start = memref::LoadOp::create(b, init, out);
    auto loop = scf::ForOp::create(b, lo, hi, cst(1), ValueRange{start});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      auto [x, y] = factors(loop.getInductionVar());
      Value product = arith::MulFOp::create(b, factor(x), factor(y));
      Value sum =
          arith::AddFOp::create(b, loop.getRegionIterArgs()[0], product);
      scf::YieldOp::create(b, ValueRange{sum});
    }
    memref::StoreOp::create(b, loop.getResult(0), init, out);
  }

  /// An scf.parallel over `bounds` whose body `body` builds.
  void parallel(ValueRange bounds, function_ref<void(ValueRange)> body) {
    SmallVector<Value> zeros(bounds.size(), cst(0)),
        ones(bounds.size(), cst(1));
    auto loop = scf::ParallelOp::create(b, zeros, bounds, ones);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVars());
  }

  /// Element `column` of the padded row `row` of `operand`, as its kernels
  /// read it.
  Value element(const switchyard::GroupedOperand &operand,
                const switchyard::GroupedOperand::Row &row, Value column) {
    Value raw = memref::LoadOp::create(b, operand.buffer(),
                                       ValueRange{row.index, column});
    return operand.scale(b, b.getLoc(), row, raw);
  }

  void lower(moe::GroupedMatmulOp op) {
    auto rows = switchyard::GroupedOperand::rows(op);
    Value w = op.getWeight(), te = op.getTileExperts(), init = op.getInit();
    bool transposed = op.getTransposeWeight();
    Value experts = dim(w, 0);
    parallel({dim(init, 0), dim(init, 1)}, [&](ValueRange pc) {
      Value p = pc[0], c = pc[1];
      Value tile = arith::DivUIOp::create(b, p, cst(op.getTileSize()));
      Value e = memref::LoadOp::create(b, te, tile);
      Value valid =
          arith::CmpIOp::create(b, arith::CmpIPredicate::ult, e, experts);
      auto ifOp = scf::IfOp::create(b, valid, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      switchyard::GroupedOperand::Row row = rows.row(b, b.getLoc(), p);
      accumulate(init, {p, c}, cst(0), dim(rows.buffer(), 1), [&](Value a) {
        SmallVector<Value> at = transposed ? SmallVector<Value>{e, c, a}
                                           : SmallVector<Value>{e, a, c};
        return std::make_pair(element(rows, row, a),
                              Value(memref::LoadOp::create(b, w, at)));
      });
    });
  }

  void lower(moe::GroupedWeightGradOp op) {
    auto lhs = switchyard::GroupedOperand::lhs(op);
    auto rhs = switchyard::GroupedOperand::rhs(op);
    Value seg = op.getSegments(), init = op.getInit();
    parallel({dim(init, 0), dim(init, 1), dim(init, 2)}, [&](ValueRange eac) {
      Value e = eac[0], a = eac[1], c = eac[2];
      Value lo = memref::LoadOp::create(b, seg, e);
      Value hi = memref::LoadOp::create(
          b, seg, ValueRange{arith::AddIOp::create(b, e, cst(1))});
      accumulate(init, {e, a, c}, lo, hi, [&](Value p) {
        return std::make_pair(element(lhs, lhs.row(b, b.getLoc(), p), a),
                              element(rhs, rhs.row(b, b.getLoc(), p), c));
      });
    });
  }

  /// A sequential loop over [lo, hi) whose body `body` builds.
  void loop(Value lo, Value hi, function_ref<void(Value)> body) {
    auto forOp = scf::ForOp::create(b, lo, hi, cst(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    body(forOp.getInductionVar());
  }

  /// The counting sort, sequentially: the counts (in segments[e + 1]),
  /// the padded segments, then each route's position in order.
  void lower(moe::SortRoutesOp op) {
    switchyard::SortedRouteIndexing routes(b, b.getLoc(), op);
    Value seg = op.getSegmentsInit(), order = op.getOrderInit(),
          slots = op.getSlotsInit(), tiles = op.getTileExpertsInit();
    Value rows = routes.expertRows;
    Value zero = cst(0), one = cst(1);
    auto load = [&](Value buffer, ValueRange at) -> Value {
      return memref::LoadOp::create(b, buffer, at);
    };
    auto store = [&](Value value, Value buffer, ValueRange at) {
      memref::StoreOp::create(b, value, buffer, at);
    };
    auto add = [&](Value x, Value y) -> Value {
      return arith::AddIOp::create(b, x, y);
    };
    loop(zero, add(rows, one), [&](Value e) { store(zero, seg, e); });
    routes.forEachRoute(b, zero, routes.routes,
                        [&](Value, Value e, Value, Value, Value) {
                          Value next = add(e, one);
                          store(add(load(seg, next), one), seg, next);
                        });
    routes.padSegments(b, seg);
    // Each expert's next position, from its segment's start.
    auto cursor = memref::AllocOp::create(
        b, MemRefType::get({ShapedType::kDynamic}, b.getIndexType()),
        ValueRange{rows});
    loop(zero, rows, [&](Value e) { store(load(seg, e), cursor, e); });
    loop(zero, routes.paddedRows,
         [&](Value p) { store(routes.routes, order, p); });
    routes.forEachRoute(b, zero, routes.routes,
                        [&](Value r, Value e, Value n, Value h, Value j) {
                          Value slot = load(cursor, e);
                          store(add(slot, one), cursor, e);
                          store(slot, slots, {n, h, j});
                          store(r, order, slot);
                        });
    memref::DeallocOp::create(b, cursor);
    loop(zero, dim(tiles, 0),
         [&](Value t) { store(routes.tileExpert(b, seg, t), tiles, t); });
  }

private:
  ImplicitLocOpBuilder &b;
  FloatType rounding;
};

struct SwitchyardLowerGroupedKernelsPass
    : public switchyard::impl::SwitchyardLowerGroupedKernelsPassBase<
          SwitchyardLowerGroupedKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    FailureOr<FloatType> rounding =
        switchyard::parseRoundingType(&getContext(), elementType);
    if (failed(rounding)) {
      func.emitError() << "switchyard-lower-grouped-kernels: unsupported "
                          "element-type '"
                       << elementType << "'; expected f32, bf16 or f16";
      return signalPassFailure();
    }
    SmallVector<Operation *> kernels;
    func.walk([&](Operation *op) {
      if (isa<moe::GroupedMatmulOp, moe::GroupedWeightGradOp,
              moe::SortRoutesOp>(op))
        kernels.push_back(op);
    });
    for (Operation *op : kernels) {
      if (op->getNumResults() != 0) {
        op->emitOpError() << "switchyard-lower-grouped-kernels runs after "
                             "bufferization: expected buffer operands";
        return signalPassFailure();
      }
      LLVM_DEBUG(llvm::dbgs() << "lowering " << op->getName() << " at "
                              << op->getLoc() << " to loops\n");
      ImplicitLocOpBuilder b(op->getLoc(), op);
      LoopBuilder loops(b, *rounding);
      if (auto matmul = dyn_cast<moe::GroupedMatmulOp>(op))
        loops.lower(matmul);
      else if (auto sort = dyn_cast<moe::SortRoutesOp>(op))
        loops.lower(sort);
      else
        loops.lower(cast<moe::GroupedWeightGradOp>(op));
      op->erase();
    }
  }
};
} // namespace

//===- GpuSortRoutes.cpp - the routes' counting sort in one block ---------===//
//
// Implements `switchyard-gpu-sort-routes`: each moe.sort_routes on buffers
// becomes one kernel of one thread block, its threads each counting a
// contiguous chunk of the routes per expert into a column of a scratch
// buffer [H·E, threads], then (barriers between) scanning the columns per
// expert, padding the segments, filling the order and the tiles' experts,
// and placing each of their routes. A chunk's routes stay in order and the
// chunks follow the threads, so the sort is stable, the same as the
// sequential one of switchyard-lower-grouped-kernels.
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Codegen/Common/GroupedOperands.h"
#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUSORTROUTESPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;

namespace {

/// Builds the kernel of one moe.sort_routes in place of it.
class SortKernelBuilder {
public:
  SortKernelBuilder(ImplicitLocOpBuilder &b, moe::SortRoutesOp op,
                    int64_t threads)
      : b(b), op(op), threads(threads), routes(b, b.getLoc(), op) {}

  void build() {
    Value rows = routes.expertRows;
    // Each thread's count of each expert row, then its first position.
    auto scratchType =
        MemRefType::get({ShapedType::kDynamic, threads}, b.getIndexType());
    Value scratch = gpu::AllocOp::create(b, scratchType, /*asyncToken=*/Type(),
                                         /*asyncDependencies=*/ValueRange(),
                                         ValueRange{rows},
                                         /*symbolOperands=*/ValueRange())
                        .getMemref();
    Value one = cst(1);
    auto launch =
        gpu::LaunchOp::create(b, one, one, one, cst(threads), one, one);
    b.setInsertionPointToStart(&launch.getBody().front());
    Value t = launch.getThreadIds().x;
    Value seg = op.getSegmentsInit(), order = op.getOrderInit(),
          slots = op.getSlotsInit(), tiles = op.getTileExpertsInit();
    // The thread's chunk of routes.
    Value chunk = arith::CeilDivUIOp::create(b, routes.routes, cst(threads));
    Value lo = arith::MinUIOp::create(b, arith::MulIOp::create(b, t, chunk),
                                      routes.routes);
    Value hi = arith::MinUIOp::create(b, arith::AddIOp::create(b, lo, chunk),
                                      routes.routes);

    forRange(cst(0), rows, one, [&](Value e) {
      store(cst(0), scratch, {e, t});
    });
    routes.forEachRoute(b, lo, hi, [&](Value, Value e, Value, Value, Value) {
      store(add(load(scratch, {e, t}), one), scratch, {e, t});
    });
    gpu::BarrierOp::create(b);
    // Expert row e's counts over the threads, in thread order: each
    // thread's first position in the segment; the total in segments[e+1].
    forRange(t, rows, cst(threads), [&](Value e) {
      auto scan =
          scf::ForOp::create(b, cst(0), cst(threads), one, ValueRange{cst(0)});
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(scan.getBody());
        Value u = scan.getInductionVar(), run = scan.getRegionIterArgs()[0];
        Value count = load(scratch, {e, u});
        store(run, scratch, {e, u});
        scf::YieldOp::create(b, add(run, count));
      }
      store(scan.getResult(0), seg, {add(e, one)});
    });
    gpu::BarrierOp::create(b);
    Value first = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, t, cst(0));
    auto ifFirst = scf::IfOp::create(b, first, /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifFirst.thenBlock());
      store(cst(0), seg, {cst(0)});
      routes.padSegments(b, seg);
    }
    gpu::BarrierOp::create(b);
    forRange(t, routes.paddedRows, cst(threads),
             [&](Value p) { store(routes.routes, order, {p}); });
    Value tileCount = memref::DimOp::create(b, tiles, 0);
    forRange(t, tileCount, cst(threads),
             [&](Value i) { store(routes.tileExpert(b, seg, i), tiles, {i}); });
    // The order's fill before any route's position in it.
    gpu::BarrierOp::create(b);
    routes.forEachRoute(b, lo, hi,
                        [&](Value r, Value e, Value n, Value h, Value j) {
                          Value rank = load(scratch, {e, t});
                          store(add(rank, one), scratch, {e, t});
                          Value slot = add(load(seg, {e}), rank);
                          store(slot, slots, {n, h, j});
                          store(r, order, {slot});
                        });
    gpu::TerminatorOp::create(b);
    b.setInsertionPointAfter(launch);
    gpu::DeallocOp::create(b, /*asyncToken=*/Type(),
                           /*asyncDependencies=*/ValueRange(), scratch);
  }

private:
  Value cst(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value load(Value buffer, ValueRange at) {
    return memref::LoadOp::create(b, buffer, at);
  }
  void store(Value value, Value buffer, ValueRange at) {
    memref::StoreOp::create(b, value, buffer, at);
  }
  /// A loop over [lo, hi) by `step` whose body `body` builds.
  void forRange(Value lo, Value hi, Value step,
                function_ref<void(Value)> body) {
    auto loop = scf::ForOp::create(b, lo, hi, step);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    body(loop.getInductionVar());
  }

  ImplicitLocOpBuilder &b;
  moe::SortRoutesOp op;
  int64_t threads;
  switchyard::SortedRouteIndexing routes;
};

struct SwitchyardGpuSortRoutesPass
    : public switchyard::impl::SwitchyardGpuSortRoutesPassBase<
          SwitchyardGpuSortRoutesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<moe::SortRoutesOp> sorts;
    getOperation().walk([&](moe::SortRoutesOp op) { sorts.push_back(op); });
    for (moe::SortRoutesOp op : sorts) {
      if (op->getNumResults() != 0) {
        op->emitOpError() << "switchyard-gpu-sort-routes runs after "
                             "bufferization: expected buffer operands";
        return signalPassFailure();
      }
      ImplicitLocOpBuilder b(op.getLoc(), op);
      SortKernelBuilder(b, op, blockSize).build();
      op->erase();
    }
  }
};

} // namespace

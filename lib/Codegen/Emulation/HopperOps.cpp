//===- HopperOps.cpp - sm_90's asynchronous ops on the host ---------------===//
//
// The GPU emulation of the wgmma route's ops (sm_90a), rewritten into plain
// loads, stores and loops before a kernel's threads are serialised. The
// semantics are the PTX ISA's, written out here independently of the
// kernels that use them (Wgmma.cpp) and of nvgpu's lowering, so that running
// the kernels checks their coordinates, shared-memory offsets, swizzles,
// transaction byte counts and barrier phases:
//
//   cp.async.bulk.tensor (nvgpu.tma.async.load, a 2-D R x C box at
//   coordinates (column, row), innermost first): box element (r, c) is the
//   global tensor's (row + r, column + c), zero (OOB_ZERO) or NaN (OOB_NAN)
//   outside the tensor, and lands in shared memory at byte
//   swizzle(dst + (r·C + c)·bytes). The 32-, 64- and 128-byte swizzles XOR
//   address bits [4, 4 + b) with bits [7, 7 + b), b = 1, 2, 3 (CUTLASS's
//   Swizzle<b, 4, 3>), on the address (the emulated shared memory starts
//   16 bytes past a 1024-byte boundary: the alignment the declaration
//   promises, no more). The box's R·C·bytes count as complete_tx on its
//   mbarrier.
//
//   mbarrier: an expected arrival count, the arrivals still pending, the
//   transaction bytes still pending (signed: bytes may complete before they
//   are expected) and the phase. A phase completes when no arrival and no
//   byte is pending; the pending arrivals are then reset to the count.
//   try_wait.parity(p) succeeds once the phase of parity p has completed:
//   when the current phase's parity differs from p. Bytes still owed to the
//   next phase when a wait succeeds (a negative count: more bytes arrived
//   than were expected) mean that the phase completed before its data had
//   arrived, and abort.
//
//   wgmma.mma_async (nvgpu.warpgroup.mma, f32 accumulators): D = A·B + D,
//   per warpgroup of 128 threads, A (M x K) and B (K x N) read from shared
//   memory in the canonical layouts of the descriptors, with S the swizzle's
//   span in bytes, SBO = 8·S (between groups of eight rows) and LBO = S
//   times the rows of the tensor map's box (between S-byte column chunks),
//   as nvgpu.warpgroup.generate.descriptor encodes them:
//     A, K-major (K·bytes = S): element (m, k) at
//       start + (m / 8)·SBO + (m % 8)·S + k·bytes
//     B, N-major (transposeB): element (k, n) at
//       start + (n / (S / bytes))·LBO + (k / 8)·SBO + (k % 8)·S
//             + (n % (S / bytes))·bytes
//   each address then swizzled; the descriptors' base offset is 0, so each
//   tile must start at a multiple of 8 spans of the address (a tile that
//   does not aborts the run). The accumulators are the warpgroup's
//   M x N tile (their distribution over the threads' registers is upstream's
//   lowering's and not modelled: the kernels reach them through
//   nvgpu.warpgroup.mma.store only).
//
// Time is not modelled: a TMA load and a wgmma take effect when issued, and
// a wait on a phase that the emulation's order of threads has not completed
// aborts (on a GPU the thread would wait for threads that the emulation runs
// later). Asynchronous reads that overlap later writes on a GPU (a wgmma
// left running past the next TMA load into its tile) are not detected.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Emulation/HopperOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace {
constexpr int64_t kWarpgroupSize = 128;
/// The fields of an emulated mbarrier, one i64 each.
enum BarrierField : int64_t { kCount, kPending, kTxPending, kPhase, kFields };

bool isWarpgroupCollective(Operation *op) {
  return isa<nvgpu::WarpgroupMmaInitAccumulatorOp, nvgpu::WarpgroupMmaOp,
             nvgpu::WarpgroupMmaStoreOp>(op);
}

/// The swizzle's span in bytes; 0 without swizzle.
int64_t swizzleSpan(nvgpu::TensorMapSwizzleKind kind) {
  switch (kind) {
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE:
    return 0;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_32B:
    return 32;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_64B:
    return 64;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_128B:
    return 128;
  }
  llvm_unreachable("a swizzle kind");
}

int64_t elementBytes(MemRefType type) {
  return type.getElementTypeBitWidth() / 8;
}

/// The TMA descriptor `descriptor`'s global tensor: the ranked buffer that
/// nvgpu.tma.create.descriptor took through a memref.cast.
FailureOr<Value> globalTensor(Value descriptor, Operation *user) {
  auto create = descriptor.getDefiningOp<nvgpu::TmaCreateDescriptorOp>();
  auto ranked = create ? create.getTensor().getDefiningOp<memref::CastOp>()
                       : memref::CastOp();
  if (!ranked || !isa<MemRefType>(ranked.getSource().getType()))
    return user->emitOpError()
           << "takes a TMA descriptor that the GPU emulation cannot trace "
              "to nvgpu.tma.create.descriptor of a ranked buffer";
  auto map = cast<nvgpu::TensorMapDescriptorType>(descriptor.getType());
  auto box = map.getTensor();
  auto tensor = cast<MemRefType>(ranked.getSource().getType());
  if (box.getRank() != 2 || tensor.getRank() != 2 ||
      box.getElementType() != tensor.getElementType())
    return user->emitOpError() << "is emulated for 2-D tiles of a 2-D "
                                  "tensor of the box's element type only";
  for (auto [d, size] : llvm::enumerate(create.getBoxDimensions())) {
    // Outermost first, as the box's shape (mgpuTensorMapEncodeTiledMemref
    // reverses them for the driver).
    std::optional<int64_t> constant = getConstantIntValue(size);
    if (!constant || *constant != box.getDimSize(d))
      return user->emitOpError()
             << "takes a TMA descriptor whose box dimensions differ from "
                "its type's tensor "
             << box;
  }
  if (map.getInterleave() != nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE)
    return user->emitOpError() << "is emulated without interleave only";
  int64_t span = swizzleSpan(map.getSwizzle());
  if (span && box.getDimSize(1) * elementBytes(box) > span)
    return user->emitOpError()
           << "loads boxes whose rows are wider than their swizzle, which "
              "the PTX ISA does not allow";
  return ranked.getSource();
}

/// The byte offset, within dynamic shared memory, of `view`: a memref.view
/// of gpu.dynamic_shared_memory with an identity layout.
FailureOr<Value> sharedOffset(Value view, Operation *user) {
  auto op = view.getDefiningOp<memref::ViewOp>();
  if (!op || !op.getSource().getDefiningOp<gpu::DynamicSharedMemoryOp>() ||
      !op.getType().getLayout().isIdentity() || !op.getType().hasStaticShape())
    return user->emitOpError()
           << "reaches shared memory other than through a memref.view of "
              "gpu.dynamic_shared_memory of a static shape, which the GPU "
              "emulation does not follow";
  return op.getByteShift();
}

/// Whether all threads of a block reach `op` together: each op around it up
/// to the launch is an scf.for or scf.if (whose bounds and conditions the
/// serialisation then checks are the same for all threads).
LogicalResult checkReachedByAll(Operation *op, gpu::LaunchOp launch) {
  for (Operation *p = op->getParentOp(); p != launch; p = p->getParentOp())
    if (!isa<scf::ForOp, scf::IfOp>(p))
      return op->emitOpError()
             << "inside " << p->getName()
             << " is not emulated: a warpgroup op runs where all threads "
                "reach it (the top of the kernel, scf.for and scf.if)";
  return success();
}

LogicalResult checkWgmma(nvgpu::WarpgroupMmaOp mma) {
  auto typeA = mma.getDescriptorA().getType().getTensor();
  auto typeB = mma.getDescriptorB().getType().getTensor();
  auto generateA = mma.getDescriptorA()
                       .getDefiningOp<nvgpu::WarpgroupGenerateDescriptorOp>();
  auto generateB = mma.getDescriptorB()
                       .getDefiningOp<nvgpu::WarpgroupGenerateDescriptorOp>();
  if (!generateA || !generateB)
    return mma.emitOpError() << "takes descriptors that the GPU emulation "
                                "cannot trace to "
                                "nvgpu.warpgroup.generate.descriptor";
  int64_t spanA = swizzleSpan(generateA.getTensorMap().getType().getSwizzle());
  int64_t spanB = swizzleSpan(generateB.getTensorMap().getType().getSwizzle());
  Type element = typeA.getElementType();
  auto acc = cast<nvgpu::WarpgroupAccumulatorType>(mma.getMatrixC().getType())
                 .getFragmented();
  if (mma.getTransposeA() || !mma.getTransposeB() || !spanA || !spanB ||
      !(element.isBF16() || element.isF16()) ||
      typeB.getElementType() != element || !acc.getElementType().isF32() ||
      typeA.getRank() != 2 || typeB.getRank() != 2 ||
      typeA.getDimSize(1) * elementBytes(typeA) != spanA ||
      typeB.getDimSize(1) % (spanB / elementBytes(typeB)) != 0 ||
      typeA.getDimSize(0) != acc.getDimSize(0) ||
      typeB.getDimSize(1) != acc.getDimSize(1) ||
      typeA.getDimSize(1) != typeB.getDimSize(0) || acc.getDimSize(0) % 64 != 0)
    return mma.emitOpError()
           << "is emulated as wgmma with A K-major (rows as wide as its "
              "swizzle) and B N-major (transposeB) in swizzled shared "
              "memory, bf16 or f16 factors and f32 accumulators";
  return success();
}

/// Rewrites one launch; see emulateHopperOps.
class HopperEmulator {
public:
  HopperEmulator(gpu::LaunchOp launch, RewriterBase &rewriter)
      : launch(launch), rewriter(rewriter), loc(launch.getLoc()),
        tid(launch.getThreadIds().x) {}

  LogicalResult run();

private:
  Value cst(int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v);
  }
  Value i64(int64_t v) {
    return arith::ConstantIntOp::create(rewriter, loc, rewriter.getI64Type(),
                                        v);
  }
  Value add(Value x, Value y) {
    return arith::AddIOp::create(rewriter, loc, x, y);
  }
  Value mul(Value x, int64_t y) {
    return arith::MulIOp::create(rewriter, loc, x, cst(y));
  }
  Value div(Value x, int64_t y) {
    return arith::DivUIOp::create(rewriter, loc, x, cst(y));
  }
  Value rem(Value x, int64_t y) {
    return arith::RemUIOp::create(rewriter, loc, x, cst(y));
  }
  /// A host buffer made before the launch and freed after it.
  Value hostBuffer(MemRefType type);
  /// All of dynamic shared memory as elements of `type`, viewed once at the
  /// top of the kernel.
  Value sharedElements(Type type);
  /// The element of `type` at (unswizzled) byte `byte` of dynamic shared
  /// memory, whose start is at address `base`, in the layout of a swizzle
  /// of `span` bytes (0: none), which permutes by address: its index in
  /// sharedElements(type).
  Value swizzledIndex(Value byte, int64_t span, Type type, Value base);
  /// Builds `body` under `predicate` where there is one.
  void guarded(Value predicate, function_ref<void()> body);
  /// Loops over [0, extent) for each extent, `body` inside with the
  /// induction variables.
  void loops(ArrayRef<int64_t> extents, function_ref<void(ValueRange)> body);

  Value field(Value state, Value id, BarrierField f) {
    return memref::LoadOp::create(rewriter, loc, state, ValueRange{id, cst(f)});
  }
  void setField(Value state, Value id, BarrierField f, Value v) {
    memref::StoreOp::create(rewriter, loc, v, state, ValueRange{id, cst(f)});
  }
  void completeIfDone(Value state, Value id);
  void arrive(Value state, Value id);
  void completeTx(Value state, Value id, int64_t bytes);

  void emulateBarriers();
  LogicalResult emulateTmaLoad(nvgpu::TmaAsyncLoadOp load);
  LogicalResult emulateWarpgroups();
  /// Replaces `op` by `body` run by the first thread of each warpgroup
  /// (given the warpgroup's index) between two barriers.
  void perWarpgroup(Operation *op, function_ref<void(Value)> body);
  void emulateWgmma(nvgpu::WarpgroupMmaOp mma, Value acc);
  /// `loop` without its iteration arguments of warpgroup accumulators.
  void dropAccumulators(scf::ForOp loop);

  gpu::LaunchOp launch;
  RewriterBase &rewriter;
  Location loc;
  Value tid;
  DenseMap<Value, Value> barrierStates;
  DenseMap<Type, Value> sharedViews;
  SmallVector<Value> hostBuffers;
};

Value HopperEmulator::hostBuffer(MemRefType type) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(launch);
  Value buffer =
      memref::AllocOp::create(rewriter, loc, type, ValueRange(), ValueRange(),
                              rewriter.getI64IntegerAttr(64));
  hostBuffers.push_back(buffer);
  return buffer;
}

Value HopperEmulator::sharedElements(Type type) {
  Value &view = sharedViews[type];
  if (view)
    return view;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(launch);
  Value bytes =
      arith::IndexCastUIOp::create(rewriter, loc, rewriter.getIndexType(),
                                   launch.getDynamicSharedMemorySize());
  Value count = div(bytes, type.getIntOrFloatBitWidth() / 8);
  rewriter.setInsertionPointToStart(&launch.getBody().front());
  auto space = gpu::AddressSpaceAttr::get(rewriter.getContext(),
                                          gpu::AddressSpace::Workgroup);
  Value shared = gpu::DynamicSharedMemoryOp::create(
      rewriter, loc,
      MemRefType::get({ShapedType::kDynamic}, rewriter.getI8Type(),
                      MemRefLayoutAttrInterface(), space));
  view = memref::ViewOp::create(rewriter, loc,
                                MemRefType::get({ShapedType::kDynamic}, type,
                                                MemRefLayoutAttrInterface(),
                                                space),
                                shared, cst(0), ValueRange{count});
  return view;
}

Value HopperEmulator::swizzledIndex(Value byte, int64_t span, Type type,
                                    Value base) {
  if (span) {
    // Bits [4, 4 + b) ^= bits [7, 7 + b) of the address, b =
    // log2(span / 16).
    int64_t mask = (span / 16 - 1) << 4;
    Value address = add(base, byte);
    Value high = arith::AndIOp::create(
        rewriter, loc, arith::ShRUIOp::create(rewriter, loc, address, cst(3)),
        cst(mask));
    byte = arith::SubIOp::create(
        rewriter, loc, arith::XOrIOp::create(rewriter, loc, address, high),
        base);
  }
  return div(byte, type.getIntOrFloatBitWidth() / 8);
}

void HopperEmulator::guarded(Value predicate, function_ref<void()> body) {
  if (!predicate)
    return body();
  auto ifOp = scf::IfOp::create(rewriter, loc, TypeRange{}, predicate,
                                /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(ifOp.thenBlock());
  body();
}

void HopperEmulator::loops(ArrayRef<int64_t> extents,
                           function_ref<void(ValueRange)> body) {
  OpBuilder::InsertionGuard guard(rewriter);
  SmallVector<Value> ivs;
  for (int64_t extent : extents) {
    auto loop = scf::ForOp::create(rewriter, loc, cst(0), cst(extent), cst(1));
    ivs.push_back(loop.getInductionVar());
    rewriter.setInsertionPoint(loop.getBody()->getTerminator());
  }
  body(ivs);
}

void HopperEmulator::completeIfDone(Value state, Value id) {
  Value zero = i64(0);
  Value done = arith::AndIOp::create(
      rewriter, loc,
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                            field(state, id, kPending), zero),
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                            field(state, id, kTxPending), zero));
  guarded(done, [&] {
    setField(state, id, kPending, field(state, id, kCount));
    setField(
        state, id, kPhase,
        arith::AddIOp::create(rewriter, loc, field(state, id, kPhase), i64(1)));
  });
}

void HopperEmulator::arrive(Value state, Value id) {
  Value pending =
      arith::SubIOp::create(rewriter, loc, field(state, id, kPending), i64(1));
  cf::AssertOp::create(
      rewriter, loc,
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sge, pending,
                            i64(0)),
      "GPU emulation: an mbarrier received more arrivals in one phase than "
      "its count");
  setField(state, id, kPending, pending);
  completeIfDone(state, id);
}

void HopperEmulator::completeTx(Value state, Value id, int64_t bytes) {
  setField(state, id, kTxPending,
           arith::SubIOp::create(rewriter, loc, field(state, id, kTxPending),
                                 i64(bytes)));
  completeIfDone(state, id);
}

void HopperEmulator::emulateBarriers() {
  SmallVector<nvgpu::MBarrierCreateOp> groups;
  SmallVector<Operation *> ops;
  launch.getBody().walk([&](Operation *op) {
    if (auto create = dyn_cast<nvgpu::MBarrierCreateOp>(op))
      groups.push_back(create);
    if (isa<nvgpu::MBarrierInitOp, nvgpu::MBarrierArriveExpectTxOp,
            nvgpu::MBarrierArriveOp, nvgpu::MBarrierTryWaitParityOp>(op))
      ops.push_back(op);
  });
  // The groups first: one host buffer of states each (the blocks run one
  // after another, and each initialises its barriers).
  for (nvgpu::MBarrierCreateOp create : groups)
    barrierStates[create.getBarriers()] = hostBuffer(MemRefType::get(
        {int64_t(create.getBarriers().getType().getNumBarriers()), kFields},
        rewriter.getI64Type()));
  auto toI64 = [&](Value index) -> Value {
    return arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(),
                                      index);
  };
  for (Operation *op : ops) {
    rewriter.setInsertionPoint(op);
    if (auto init = dyn_cast<nvgpu::MBarrierInitOp>(op)) {
      Value state = barrierStates.lookup(init.getBarriers());
      guarded(init.getPredicate(), [&] {
        Value id = init.getMbarId(), count = toI64(init.getCount());
        setField(state, id, kCount, count);
        setField(state, id, kPending, count);
        setField(state, id, kTxPending, i64(0));
        setField(state, id, kPhase, i64(0));
      });
    } else if (auto expect = dyn_cast<nvgpu::MBarrierArriveExpectTxOp>(op)) {
      Value state = barrierStates.lookup(expect.getBarriers());
      guarded(expect.getPredicate(), [&] {
        Value id = expect.getMbarId();
        setField(state, id, kTxPending,
                 add(field(state, id, kTxPending), toI64(expect.getTxcount())));
        arrive(state, id);
      });
    } else if (auto arrival = dyn_cast<nvgpu::MBarrierArriveOp>(op)) {
      // Its token is unused (checkHopperOps).
      arrive(barrierStates.lookup(arrival.getBarriers()), arrival.getMbarId());
    } else if (auto wait = dyn_cast<nvgpu::MBarrierTryWaitParityOp>(op)) {
      Value state = barrierStates.lookup(wait.getBarriers());
      Value parity = arith::AndIOp::create(
          rewriter, loc, field(state, wait.getMbarId(), kPhase), i64(1));
      Value waitedFor = arith::ExtUIOp::create(
          rewriter, loc, rewriter.getI64Type(), wait.getPhaseParity());
      cf::AssertOp::create(
          rewriter, loc,
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ne, parity,
                                waitedFor),
          "GPU emulation: a thread waits on an mbarrier phase that has not "
          "completed (arrivals or transaction bytes missing, or left to "
          "threads that run later): on a GPU it would hang or wait on them");
      // Bytes that completed after their phase did: the phase let its
      // waiters go before those bytes arrived.
      cf::AssertOp::create(
          rewriter, loc,
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sge,
                                field(state, wait.getMbarId(), kTxPending),
                                i64(0)),
          "GPU emulation: TMA loads completed more bytes on an mbarrier than "
          "arrive.expect_tx announced: on a GPU its phase completes before "
          "their data has arrived");
    } else {
      continue;
    }
    rewriter.eraseOp(op);
  }
  // The groups go once the TMA loads that complete on them do (run).
}

LogicalResult HopperEmulator::emulateTmaLoad(nvgpu::TmaAsyncLoadOp load) {
  FailureOr<Value> tensor = globalTensor(load.getTensorMapDescriptor(), load);
  FailureOr<Value> offset = sharedOffset(load.getDst(), load);
  if (failed(tensor) || failed(offset))
    return failure();
  auto map = load.getTensorMapDescriptor().getType();
  MemRefType box = map.getTensor();
  int64_t rows = box.getDimSize(0), cols = box.getDimSize(1);
  int64_t bytes = elementBytes(box);
  int64_t span = swizzleSpan(map.getSwizzle());
  Type element = box.getElementType();
  rewriter.setInsertionPoint(load);
  Value shared = sharedElements(element);
  Value base =
      memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, shared);
  Value state = barrierStates.lookup(load.getBarriers());
  Value column = load.getCoordinates()[0], row = load.getCoordinates()[1];
  guarded(load.getPredicate(), [&] {
    Value height = memref::DimOp::create(rewriter, loc, *tensor, 0);
    Value width = memref::DimOp::create(rewriter, loc, *tensor, 1);
    auto floatType = cast<FloatType>(element);
    Value outside = arith::ConstantOp::create(
        rewriter, loc,
        FloatAttr::get(floatType,
                       map.getOob() == nvgpu::TensorMapOOBKind::OOB_NAN
                           ? APFloat::getNaN(floatType.getFloatSemantics())
                           : APFloat::getZero(floatType.getFloatSemantics())));
    loops({rows, cols}, [&](ValueRange rc) {
      Value r = add(row, rc[0]), c = add(column, rc[1]);
      // Unsigned: a negative coordinate is outside too.
      Value inside = arith::AndIOp::create(
          rewriter, loc,
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, r,
                                height),
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, c,
                                width));
      auto pick = scf::IfOp::create(rewriter, loc, TypeRange{element}, inside,
                                    /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPointToStart(pick.thenBlock());
        scf::YieldOp::create(
            rewriter, loc,
            ValueRange{
                memref::LoadOp::create(rewriter, loc, *tensor, ValueRange{r, c})
                    .getResult()});
        rewriter.setInsertionPointToStart(pick.elseBlock());
        scf::YieldOp::create(rewriter, loc, outside);
      }
      Value byte = add(*offset, mul(add(mul(rc[0], cols), rc[1]), bytes));
      memref::StoreOp::create(rewriter, loc, pick.getResult(0), shared,
                              swizzledIndex(byte, span, element, base));
    });
    completeTx(state, load.getMbarId(), rows * cols * bytes);
  });
  rewriter.eraseOp(load);
  return success();
}

void HopperEmulator::perWarpgroup(Operation *op,
                                  function_ref<void(Value)> body) {
  rewriter.setInsertionPoint(op);
  gpu::BarrierOp::create(rewriter, loc);
  Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                      rem(tid, kWarpgroupSize), cst(0));
  guarded(first, [&] { body(div(tid, kWarpgroupSize)); });
  gpu::BarrierOp::create(rewriter, loc);
}

void HopperEmulator::emulateWgmma(nvgpu::WarpgroupMmaOp mma, Value acc) {
  auto generateA = mma.getDescriptorA()
                       .getDefiningOp<nvgpu::WarpgroupGenerateDescriptorOp>();
  auto generateB = mma.getDescriptorB()
                       .getDefiningOp<nvgpu::WarpgroupGenerateDescriptorOp>();
  MemRefType typeA = generateA.getTensor().getType();
  MemRefType typeB = generateB.getTensor().getType();
  int64_t spanA = swizzleSpan(generateA.getTensorMap().getType().getSwizzle());
  int64_t spanB = swizzleSpan(generateB.getTensorMap().getType().getSwizzle());
  int64_t bytes = elementBytes(typeA);
  int64_t sizeM = typeA.getDimSize(0), sizeK = typeA.getDimSize(1),
          sizeN = typeB.getDimSize(1);
  // The strides that the descriptors encode.
  int64_t strideA = 8 * spanA, strideB = 8 * spanB;
  int64_t leadB =
      spanB * generateB.getTensorMap().getType().getTensor().getDimSize(0);
  int64_t chunkB = spanB / bytes;
  Type element = typeA.getElementType();
  Type f32 = rewriter.getF32Type();
  perWarpgroup(mma, [&](Value wg) {
    Value startA = *sharedOffset(generateA.getTensor(), mma);
    Value startB = *sharedOffset(generateB.getTensor(), mma);
    Value shared = sharedElements(element);
    // The descriptors' base offset is 0: each swizzled tile starts where
    // the swizzle's pattern of 8 rows does, at a multiple of 8 spans of
    // the shared address.
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, shared);
    for (auto [start, span] : {std::pair(startA, spanA), {startB, spanB}})
      cf::AssertOp::create(
          rewriter, loc,
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                rem(add(address, start), 8 * span), cst(0)),
          llvm::formatv("GPU emulation: a wgmma operand's tile with the "
                        "{0}-byte swizzle does not start at a multiple of "
                        "{1} bytes of shared memory, where its descriptor "
                        "(base offset 0) has the swizzle's pattern start",
                        span, 8 * span)
              .str());
    loops({sizeM, sizeN}, [&](ValueRange mn) {
      Value m = mn[0], n = mn[1];
      Value rowA =
          add(startA, add(mul(div(m, 8), strideA), mul(rem(m, 8), spanA)));
      Value columnB = add(
          startB, add(mul(div(n, chunkB), leadB), mul(rem(n, chunkB), bytes)));
      SmallVector<Value> at{wg, m, n};
      Value init = memref::LoadOp::create(rewriter, loc, acc, at);
      auto kLoop = scf::ForOp::create(rewriter, loc, cst(0), cst(sizeK), cst(1),
                                      ValueRange{init});
      {
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPointToStart(kLoop.getBody());
        Value k = kLoop.getInductionVar();
        Value byteA = add(rowA, mul(k, bytes));
        Value byteB =
            add(columnB, add(mul(div(k, 8), strideB), mul(rem(k, 8), spanB)));
        auto read = [&](Value byte, int64_t span) -> Value {
          Value v = memref::LoadOp::create(
              rewriter, loc, shared,
              swizzledIndex(byte, span, element, address));
          return arith::ExtFOp::create(rewriter, loc, f32, v);
        };
        Value product = arith::MulFOp::create(rewriter, loc, read(byteA, spanA),
                                              read(byteB, spanB));
        scf::YieldOp::create(
            rewriter, loc,
            ValueRange{arith::AddFOp::create(
                           rewriter, loc, kLoop.getRegionIterArgs()[0], product)
                           .getResult()});
      }
      memref::StoreOp::create(rewriter, loc, kLoop.getResult(0), acc, at);
    });
  });
}

LogicalResult HopperEmulator::emulateWarpgroups() {
  // The accumulators: each chain from an init, through mmas and loops, to
  // stores is one host buffer with an M x N tile per warpgroup. Pre-order:
  // a loop's iteration arguments and results take its init's buffer before
  // its body is seen.
  int64_t warpgroups =
      *getConstantIntValue(launch.getBlockSizeX()) / kWarpgroupSize;
  DenseMap<Value, Value> buffers;
  SmallVector<Operation *> collectives;
  SmallVector<scf::ForOp> carriers;
  launch.getBody().walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto init = dyn_cast<nvgpu::WarpgroupMmaInitAccumulatorOp>(op)) {
      VectorType tile = init.getMatrixC().getType().getFragmented();
      buffers[init.getMatrixC()] = hostBuffer(
          MemRefType::get({warpgroups, tile.getDimSize(0), tile.getDimSize(1)},
                          tile.getElementType()));
    } else if (auto mma = dyn_cast<nvgpu::WarpgroupMmaOp>(op)) {
      buffers[mma.getMatrixD()] = buffers.lookup(mma.getMatrixC());
    } else if (auto loop = dyn_cast<scf::ForOp>(op)) {
      bool carries = false;
      for (auto [init, arg, result] :
           llvm::zip_equal(loop.getInitArgs(), loop.getRegionIterArgs(),
                           loop.getResults())) {
        if (!isa<nvgpu::WarpgroupAccumulatorType>(init.getType()))
          continue;
        carries = true;
        buffers[arg] = buffers[result] = buffers.lookup(init);
      }
      if (carries)
        carriers.push_back(loop);
    }
    if (isWarpgroupCollective(op))
      collectives.push_back(op);
  });
  // Each accumulator value used once at most (the buffer is updated in
  // place), and each loop yields its argument's chain.
  for (auto [value, buffer] : buffers)
    if (!buffer || !(value.use_empty() || value.hasOneUse()))
      return launch.emitOpError()
             << "uses warpgroup accumulators other than in one chain from an "
                "init through mmas and loops, which the GPU emulation does "
                "not follow";
  for (scf::ForOp loop : carriers) {
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    for (auto [i, init] : llvm::enumerate(loop.getInitArgs()))
      if (isa<nvgpu::WarpgroupAccumulatorType>(init.getType()) &&
          buffers.lookup(yield.getOperand(i)) != buffers.lookup(init))
        return loop.emitOpError()
               << "yields warpgroup accumulators of another chain, which the "
                  "GPU emulation does not follow";
  }

  for (Operation *op : collectives) {
    if (auto init = dyn_cast<nvgpu::WarpgroupMmaInitAccumulatorOp>(op)) {
      Value acc = buffers.lookup(init.getMatrixC());
      VectorType tile = init.getMatrixC().getType().getFragmented();
      perWarpgroup(op, [&](Value wg) {
        Value zero = arith::ConstantOp::create(
            rewriter, loc, rewriter.getZeroAttr(tile.getElementType()));
        loops(tile.getShape(), [&](ValueRange mn) {
          memref::StoreOp::create(rewriter, loc, zero, acc,
                                  ValueRange{wg, mn[0], mn[1]});
        });
      });
    } else if (auto mma = dyn_cast<nvgpu::WarpgroupMmaOp>(op)) {
      emulateWgmma(mma, buffers.lookup(mma.getMatrixC()));
    } else {
      auto store = cast<nvgpu::WarpgroupMmaStoreOp>(op);
      Value acc = buffers.lookup(store.getMatrixD());
      VectorType tile = store.getMatrixD().getType().getFragmented();
      perWarpgroup(op, [&](Value wg) {
        loops(tile.getShape(), [&](ValueRange mn) {
          Value v = memref::LoadOp::create(rewriter, loc, acc,
                                           ValueRange{wg, mn[0], mn[1]});
          memref::StoreOp::create(rewriter, loc, v, store.getDstMemref(), mn);
        });
      });
    }
  }

  // The accumulator values are now the buffers: the loops no longer carry
  // them (innermost first), and the ops that made them go.
  for (scf::ForOp loop : llvm::reverse(carriers))
    dropAccumulators(loop);
  SmallVector<Operation *> inits;
  llvm::SetVector<Operation *> descriptors;
  for (Operation *op : llvm::reverse(collectives)) {
    if (auto mma = dyn_cast<nvgpu::WarpgroupMmaOp>(op)) {
      descriptors.insert(mma.getDescriptorA().getDefiningOp());
      descriptors.insert(mma.getDescriptorB().getDefiningOp());
      rewriter.replaceOp(mma, mma.getMatrixC());
    } else if (isa<nvgpu::WarpgroupMmaStoreOp>(op)) {
      rewriter.eraseOp(op);
    } else {
      inits.push_back(op);
    }
  }
  for (Operation *op : inits)
    rewriter.eraseOp(op);
  for (Operation *op : descriptors)
    if (op->use_empty())
      rewriter.eraseOp(op);
  return success();
}

void HopperEmulator::dropAccumulators(scf::ForOp loop) {
  SmallVector<Value> inits;
  SmallVector<bool> kept;
  for (Value init : loop.getInitArgs()) {
    kept.push_back(!isa<nvgpu::WarpgroupAccumulatorType>(init.getType()));
    if (kept.back())
      inits.push_back(init);
  }
  rewriter.setInsertionPoint(loop);
  auto plain = scf::ForOp::create(
      rewriter, loc, loop.getLowerBound(), loop.getUpperBound(), loop.getStep(),
      inits, /*bodyBuilder=*/nullptr, loop.getUnsignedCmp());
  if (inits.empty())
    rewriter.eraseOp(plain.getBody()->getTerminator());
  // A dropped argument or result stands for its chain: its init.
  SmallVector<Value> arguments{plain.getInductionVar()}, results;
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  SmallVector<Value> yielded;
  int64_t next = 0;
  for (auto [i, init] : llvm::enumerate(loop.getInitArgs())) {
    if (!kept[i]) {
      arguments.push_back(init);
      results.push_back(init);
      continue;
    }
    arguments.push_back(plain.getRegionIterArgs()[next]);
    results.push_back(plain.getResult(next++));
    yielded.push_back(yield.getOperand(i));
  }
  rewriter.setInsertionPoint(yield);
  scf::YieldOp::create(rewriter, loc, yielded);
  rewriter.eraseOp(yield);
  rewriter.mergeBlocks(loop.getBody(), plain.getBody(), arguments);
  rewriter.replaceOp(loop, results);
}

LogicalResult HopperEmulator::run() {
  emulateBarriers();
  SmallVector<nvgpu::TmaAsyncLoadOp> loads;
  SmallVector<nvgpu::TmaPrefetchOp> prefetches;
  launch.getBody().walk([&](Operation *op) {
    if (auto load = dyn_cast<nvgpu::TmaAsyncLoadOp>(op))
      loads.push_back(load);
    else if (auto prefetch = dyn_cast<nvgpu::TmaPrefetchOp>(op))
      prefetches.push_back(prefetch);
  });
  for (nvgpu::TmaAsyncLoadOp load : loads)
    if (failed(emulateTmaLoad(load)))
      return failure();
  // Prefetching a descriptor changes no value.
  for (nvgpu::TmaPrefetchOp prefetch : prefetches)
    rewriter.eraseOp(prefetch);
  for (Value group : llvm::make_first_range(barrierStates))
    rewriter.eraseOp(group.getDefiningOp());
  if (failed(emulateWarpgroups()))
    return failure();
  rewriter.setInsertionPointAfter(launch);
  for (Value buffer : hostBuffers)
    memref::DeallocOp::create(rewriter, loc, buffer);
  return success();
}
} // namespace

bool mlir::switchyard::isHopperOp(Operation *op) {
  return isa<nvgpu::TmaAsyncLoadOp, nvgpu::TmaPrefetchOp,
             nvgpu::MBarrierCreateOp, nvgpu::MBarrierInitOp,
             nvgpu::MBarrierArriveExpectTxOp, nvgpu::MBarrierArriveOp,
             nvgpu::MBarrierTryWaitParityOp,
             nvgpu::WarpgroupGenerateDescriptorOp>(op) ||
         isWarpgroupCollective(op);
}

LogicalResult mlir::switchyard::checkHopperOps(gpu::LaunchOp launch) {
  bool collectives = false;
  // An mbarrier group of this kernel (its barriers live in its shared
  // memory).
  auto ownBarriers = [&](Value barriers, Operation *user) -> LogicalResult {
    auto create = barriers.getDefiningOp<nvgpu::MBarrierCreateOp>();
    if (create && launch->isProperAncestor(create))
      return success();
    return user->emitOpError()
           << "takes mbarriers that the GPU emulation cannot trace to "
              "nvgpu.mbarrier.create in the kernel";
  };
  WalkResult walk = launch.getBody().walk([&](Operation *op) {
    LogicalResult result = success();
    if (auto load = dyn_cast<nvgpu::TmaAsyncLoadOp>(op)) {
      if (load.getMulticastMask())
        result = load.emitOpError() << "is emulated without multicast only";
      else if (failed(globalTensor(load.getTensorMapDescriptor(), load)) ||
               failed(sharedOffset(load.getDst(), load)))
        result = failure();
      else
        result = ownBarriers(load.getBarriers(), op);
    } else if (auto init = dyn_cast<nvgpu::MBarrierInitOp>(op)) {
      result = ownBarriers(init.getBarriers(), op);
    } else if (auto expect = dyn_cast<nvgpu::MBarrierArriveExpectTxOp>(op)) {
      result = ownBarriers(expect.getBarriers(), op);
    } else if (auto arrive = dyn_cast<nvgpu::MBarrierArriveOp>(op)) {
      result = ownBarriers(arrive.getBarriers(), op);
      if (succeeded(result) && !arrive.getToken().use_empty())
        result = op->emitOpError()
                 << "is emulated only where its token is unused";
    } else if (auto wait = dyn_cast<nvgpu::MBarrierTryWaitParityOp>(op)) {
      result = ownBarriers(wait.getBarriers(), op);
    } else if (auto generate =
                   dyn_cast<nvgpu::WarpgroupGenerateDescriptorOp>(op)) {
      result = sharedOffset(generate.getTensor(), op);
    } else if (isWarpgroupCollective(op)) {
      collectives = true;
      result = checkReachedByAll(op, launch);
      if (auto mma = dyn_cast<nvgpu::WarpgroupMmaOp>(op);
          mma && succeeded(result))
        result = checkWgmma(mma);
      auto store = dyn_cast<nvgpu::WarpgroupMmaStoreOp>(op);
      if (store && succeeded(result) &&
          store.getDstMemref().getType().getShape() !=
              store.getMatrixD().getType().getFragmented().getShape())
        result = op->emitOpError()
                 << "is emulated into a memref of the accumulators' shape "
                    "only";
    }
    return failed(result) ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  std::optional<int64_t> threads = getConstantIntValue(launch.getBlockSizeX());
  if (collectives && (!threads || *threads % kWarpgroupSize != 0))
    return launch.emitOpError()
           << "runs warpgroup ops in blocks that are not a known multiple of "
              "128 threads, which the GPU emulation does not serialise";
  return success();
}

LogicalResult mlir::switchyard::emulateHopperOps(gpu::LaunchOp launch,
                                                 RewriterBase &rewriter) {
  return HopperEmulator(launch, rewriter).run();
}

void mlir::switchyard::eraseUnusedTmaDescriptors(Operation *root,
                                                 RewriterBase &rewriter) {
  SmallVector<nvgpu::TmaCreateDescriptorOp> descriptors;
  root->walk(
      [&](nvgpu::TmaCreateDescriptorOp op) { descriptors.push_back(op); });
  for (nvgpu::TmaCreateDescriptorOp op : descriptors) {
    if (!op->use_empty())
      continue;
    Operation *tensor = op.getTensor().getDefiningOp();
    rewriter.eraseOp(op);
    if (tensor && isa<memref::CastOp>(tensor) && tensor->use_empty())
      rewriter.eraseOp(tensor);
  }
}

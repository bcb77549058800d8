//===- GpuKernelReport.cpp - launch geometry and per-thread work ----------===//
//
// Implements `switchyard-gpu-kernel-report`: a static table of the kernels
// that a module launches, for finding the slow ones without a GPU. For each
// gpu.launch: how often the host code launches it, its grid and block, and
// the work of one thread (operations and memory accesses, loops counted by
// their trip counts). Sizes are evaluated from the IR (constants, arith and
// affine index arithmetic, memref.dim of allocations), the arguments of a
// function that public functions call traced to its first call and the
// results of calls to what the callee returns, and every
// dynamic size of a public function's argument taken as `dynamic-size`. A
// kernel of a function called several times per call of the public
// functions (a block of a model's layers) counts as that many launches. The
// ranking estimate is
// launches x waves x work per thread: a kernel whose threads run long loops
// in few waves (a reduction with no parallel dimension, one thread for the
// whole GPU) stands out, whatever the chip. It models neither memory
// bandwidth nor latency nor tensor-core throughput: it points at kernels
// to look at, and measurements (SWITCHYARD_KERNEL_PROFILE) decide.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

#include <functional>

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUKERNELREPORTPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

#define DEBUG_TYPE "switchyard-gpu-kernel-report"

using namespace mlir;

namespace {
/// Evaluates index and integer values of host and kernel code where their
/// operands are known: an argument of a function with a call in `callers`
/// is that call's operand, every other dynamic size of a function argument
/// is `dynamicSize`. Results are memoised; thread and block ids, loaded
/// values and loop induction variables are unknown.
class SizeEvaluator {
public:
  SizeEvaluator(int64_t dynamicSize,
                const DenseMap<Operation *, func::CallOp> &callers)
      : dynamicSize(dynamicSize), callers(callers) {}

  std::optional<int64_t> operator()(Value value) {
    auto it = known.find(value);
    if (it != known.end())
      return it->second;
    std::optional<int64_t> result = evaluate(value);
    known[value] = result;
    return result;
  }

  /// The trip count of `loop`, if its bounds are known.
  std::optional<int64_t> tripCount(scf::ForOp loop) {
    std::optional<int64_t> lb = (*this)(loop.getLowerBound());
    std::optional<int64_t> ub = (*this)(loop.getUpperBound());
    std::optional<int64_t> step = (*this)(loop.getStep());
    if (!lb || !ub || !step || *step <= 0)
      return std::nullopt;
    return *ub <= *lb ? 0 : llvm::divideCeil(*ub - *lb, *step);
  }

private:
  /// The operand of the first call that `value`, an argument of a
  /// function's entry block, receives; null if none is known.
  Value callOperand(Value value) {
    auto arg = dyn_cast<BlockArgument>(value);
    if (!arg || !arg.getOwner()->isEntryBlock())
      return {};
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!func)
      return {};
    func::CallOp call = callers.lookup(func);
    if (!call || arg.getArgNumber() >= call.getNumOperands())
      return {};
    return call.getOperand(arg.getArgNumber());
  }

  /// What the callee returns as `value`, a result of a func.call; null
  /// if the callee is not known.
  static Value returnedValue(Value value) {
    auto call = value.getDefiningOp<func::CallOp>();
    if (!call)
      return {};
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        call, call.getCalleeAttr());
    if (!callee || !callee.getBody().hasOneBlock())
      return {};
    auto ret =
        dyn_cast<func::ReturnOp>(callee.getBody().front().getTerminator());
    unsigned index = cast<OpResult>(value).getResultNumber();
    return ret && index < ret.getNumOperands() ? ret.getOperand(index)
                                               : Value();
  }

  std::optional<int64_t> evaluate(Value value) {
    Operation *def = value.getDefiningOp();
    if (!def) {
      if (Value operand = callOperand(value))
        return (*this)(operand);
      return std::nullopt;
    }
    if (Value returned = returnedValue(value))
      return (*this)(returned);
    IntegerAttr attr;
    if (matchPattern(value, m_Constant(&attr)))
      return attr.getValue().getSExtValue();
    if (auto dim = dyn_cast<memref::DimOp>(def))
      return dimSize(dim);
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
            arith::ExtUIOp, arith::TruncIOp>(def))
      return (*this)(def->getOperand(0));
    if (auto apply = dyn_cast<affine::AffineApplyOp>(def))
      return applyMap(apply.getAffineMap(), apply.getMapOperands(),
                      /*pick=*/0);
    if (auto min = dyn_cast<affine::AffineMinOp>(def))
      return applyMap(min.getAffineMap(), min.getMapOperands(), /*pick=*/-1);
    if (auto max = dyn_cast<affine::AffineMaxOp>(def))
      return applyMap(max.getAffineMap(), max.getMapOperands(), /*pick=*/1);
    if (def->getNumOperands() != 2)
      return std::nullopt;
    std::optional<int64_t> a = (*this)(def->getOperand(0));
    std::optional<int64_t> b = (*this)(def->getOperand(1));
    if (!a || !b)
      return std::nullopt;
    return llvm::TypeSwitch<Operation *, std::optional<int64_t>>(def)
        .Case([&](arith::AddIOp) { return *a + *b; })
        .Case([&](arith::SubIOp) { return *a - *b; })
        .Case([&](arith::MulIOp) { return *a * *b; })
        .Case<arith::DivSIOp, arith::DivUIOp>(
            [&](auto) -> std::optional<int64_t> {
              if (*b == 0)
                return std::nullopt;
              return *a / *b;
            })
        .Case<arith::CeilDivSIOp, arith::CeilDivUIOp>(
            [&](auto) -> std::optional<int64_t> {
              if (*b <= 0)
                return std::nullopt;
              return llvm::divideCeilSigned(*a, *b);
            })
        .Case<arith::RemSIOp, arith::RemUIOp>(
            [&](auto) -> std::optional<int64_t> {
              if (*b == 0)
                return std::nullopt;
              return *a % *b;
            })
        .Case<arith::MinSIOp, arith::MinUIOp>(
            [&](auto) { return std::min(*a, *b); })
        .Case<arith::MaxSIOp, arith::MaxUIOp>(
            [&](auto) { return std::max(*a, *b); })
        .Default([](Operation *) { return std::nullopt; });
  }

  /// The size of a memref.dim.
  std::optional<int64_t> dimSize(memref::DimOp dim) {
    std::optional<int64_t> index = (*this)(dim.getIndex());
    if (!index)
      return std::nullopt;
    return memrefSize(dim.getSource(), *index);
  }

  /// Dimension `index` of `memref`: static, an allocation's dynamic size
  /// operand, a view's sizes traced to its source, or `dynamicSize` for a
  /// function argument's dynamic dimension.
  std::optional<int64_t> memrefSize(Value memref, int64_t index) {
    auto type = dyn_cast<MemRefType>(memref.getType());
    if (!type || index < 0 || index >= type.getRank())
      return std::nullopt;
    if (!type.isDynamicDim(index))
      return type.getDimSize(index);
    Operation *def = memref.getDefiningOp();
    if (!def) {
      if (Value operand = callOperand(memref))
        return memrefSize(operand, index);
      return dynamicSize; // a public function's argument
    }
    if (Value returned = returnedValue(memref))
      return memrefSize(returned, index);
    unsigned operand = type.getDynamicDimIndex(index);
    if (auto alloc = dyn_cast<gpu::AllocOp>(def))
      return (*this)(alloc.getDynamicSizes()[operand]);
    if (isa<memref::AllocOp, memref::AllocaOp>(def))
      return (*this)(def->getOperand(operand));
    if (auto collapse = dyn_cast<memref::CollapseShapeOp>(def)) {
      int64_t size = 1;
      for (int64_t source : collapse.getReassociationIndices()[index]) {
        std::optional<int64_t> part =
            memrefSize(collapse.getViewSource(), source);
        if (!part)
          return std::nullopt;
        size *= *part;
      }
      return size;
    }
    if (auto expand = dyn_cast<memref::ExpandShapeOp>(def))
      return (*this)(expand.getOutputShape()[operand]);
    if (auto subview = dyn_cast<memref::SubViewOp>(def)) {
      // Rank-reducing subviews drop unit sizes; only the same-rank case.
      if (subview.getSourceType().getRank() != type.getRank())
        return std::nullopt;
      return foldedSize(subview.getMixedSizes()[index]);
    }
    if (auto reinterpret = dyn_cast<memref::ReinterpretCastOp>(def))
      return foldedSize(reinterpret.getMixedSizes()[index]);
    if (auto castOp = dyn_cast<memref::CastOp>(def))
      return memrefSize(castOp.getSource(), index);
    return std::nullopt;
  }

  /// A view's size: an attribute or a value.
  std::optional<int64_t> foldedSize(OpFoldResult size) {
    if (auto attr = dyn_cast<Attribute>(size))
      return cast<IntegerAttr>(attr).getInt();
    return (*this)(cast<Value>(size));
  }

  /// One result of `map` (pick 0: the only one; -1: the least; 1: the
  /// greatest) on known operands.
  std::optional<int64_t> applyMap(AffineMap map, ValueRange operands,
                                  int pick) {
    SmallVector<int64_t> values;
    for (Value operand : operands) {
      std::optional<int64_t> v = (*this)(operand);
      if (!v)
        return std::nullopt;
      values.push_back(*v);
    }
    if (map.getNumResults() == 0 || (pick == 0 && map.getNumResults() != 1))
      return std::nullopt;
    Builder builder(map.getContext());
    SmallVector<Attribute> constants;
    for (int64_t v : values)
      constants.push_back(builder.getIndexAttr(v));
    SmallVector<Attribute> folded;
    if (failed(map.constantFold(constants, folded)))
      return std::nullopt;
    SmallVector<int64_t> results;
    for (Attribute attr : folded)
      results.push_back(cast<IntegerAttr>(attr).getInt());
    if (pick < 0)
      return *llvm::min_element(results);
    return *llvm::max_element(results);
  }

  int64_t dynamicSize;
  const DenseMap<Operation *, func::CallOp> &callers;
  DenseMap<Value, std::optional<int64_t>> known;
};

/// The work of one thread: operations and memory accesses, each weighted by
/// the trip counts of the loops around it.
struct Work {
  double operations = 0;
  double memoryAccesses = 0;
  /// Whether some loop's trip count was unknown (counted once).
  bool unknownTrips = false;

  double total() const { return operations + memoryAccesses; }
  Work &operator+=(const Work &other) {
    operations += other.operations;
    memoryAccesses += other.memoryAccesses;
    unknownTrips |= other.unknownTrips;
    return *this;
  }
  Work scaled(double factor) const {
    return {operations * factor, memoryAccesses * factor, unknownTrips};
  }
};

bool isMemoryAccess(Operation *op) {
  return isa<memref::LoadOp, memref::StoreOp, vector::LoadOp,
             vector::StoreOp, vector::TransferReadOp, vector::TransferWriteOp,
             vector::MaskedLoadOp, vector::MaskedStoreOp, vector::GatherOp,
             vector::ScatterOp, memref::AtomicRMWOp,
             memref::GenericAtomicRMWOp>(op) ||
         op->getName().getStringRef().starts_with("nvgpu.");
}

Work regionWork(Region &region, SizeEvaluator &sizes);

Work opWork(Operation *op, SizeEvaluator &sizes) {
  // What only the last block runs counts once per launch (lastBlockWork).
  if (op->hasAttr(switchyard::kLastBlockAttr))
    return Work{1, 0, false};
  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    Work body = regionWork(loop.getRegion(), sizes);
    std::optional<int64_t> trips = sizes.tripCount(loop);
    if (!trips)
      body.unknownTrips = true;
    return body.scaled(trips ? static_cast<double>(*trips) : 1.0);
  }
  if (auto branch = dyn_cast<scf::IfOp>(op)) {
    // The longer branch: guards around the whole body are the common case.
    Work then = regionWork(branch.getThenRegion(), sizes);
    Work other = regionWork(branch.getElseRegion(), sizes);
    Work longer = then.total() >= other.total() ? then : other;
    longer.unknownTrips = then.unknownTrips || other.unknownTrips;
    longer.operations += 1;
    return longer;
  }
  Work work;
  if (op->getNumRegions()) {
    // scf.while and the like: once around.
    for (Region &region : op->getRegions())
      work += regionWork(region, sizes);
    if (isa<scf::WhileOp>(op))
      work.unknownTrips = true;
  }
  if (op->hasTrait<OpTrait::ConstantLike>() ||
      op->hasTrait<OpTrait::IsTerminator>())
    return work;
  if (isMemoryAccess(op))
    work.memoryAccesses += 1;
  else
    work.operations += 1;
  return work;
}

Work regionWork(Region &region, SizeEvaluator &sizes) {
  Work work;
  for (Block &block : region)
    for (Operation &op : block)
      work += opWork(&op, sizes);
  return work;
}

/// The work of what only the last block of `launch` runs: one block's
/// threads, once per launch.
Work lastBlockWork(gpu::LaunchOp launch, SizeEvaluator &sizes) {
  Work work;
  for (Operation &op : launch.getBody().front())
    if (op.hasAttr(switchyard::kLastBlockAttr))
      for (Region &region : op.getRegions())
        work += regionWork(region, sizes);
  return work;
}

/// The kinds of op whose code `launch` runs: the names of the name
/// locations of its body's ops (convert-moe-to-linalg names each moe op's
/// lowering after it), in order of appearance, `+`-joined; "-" for none.
std::string opKinds(gpu::LaunchOp launch) {
  llvm::SetVector<StringRef> names;
  launch.getBody().walk([&](Operation *op) {
    op->getLoc()->walk([&](Location loc) {
      if (auto named = dyn_cast<NameLoc>(loc))
        names.insert(named.getName().getValue());
      return WalkResult::advance();
    });
  });
  if (names.empty())
    return "-";
  return llvm::join(names, "+");
}

/// One body of a launch that switchyard-gpu-merge-launches formed: its
/// blocks of the merged grid and the work of each of their threads.
struct MergedPart {
  int64_t blocks;
  Work work;
};

/// The bodies of a merged launch (marked kMergedLaunchAttr): the chain
/// `scf.if (block id < end of body i) {body i} else {...}` that the merge
/// built, the last body in the innermost else. Empty where a bound or
/// `totalBlocks` is unknown, or the body is not that chain.
SmallVector<MergedPart> mergedParts(gpu::LaunchOp launch, SizeEvaluator &sizes,
                                    std::optional<int64_t> totalBlocks) {
  if (!launch->hasAttr(switchyard::kMergedLaunchAttr) || !totalBlocks)
    return {};
  SmallVector<MergedPart> parts;
  Value blockId = launch.getBlockIds().x;
  int64_t start = 0;
  Block *block = &launch.getBody().front();
  while (true) {
    scf::IfOp next;
    for (Operation &op : *block)
      if (auto branch = dyn_cast<scf::IfOp>(op)) {
        auto compare = branch.getCondition().getDefiningOp<arith::CmpIOp>();
        if (compare && compare.getPredicate() == arith::CmpIPredicate::ult &&
            compare.getLhs() == blockId) {
          next = branch;
          break;
        }
      }
    if (!next) {
      Work work;
      for (Operation &op : *block)
        work += opWork(&op, sizes);
      parts.push_back({*totalBlocks - start, work});
      return parts;
    }
    std::optional<int64_t> end =
        sizes(next.getCondition().getDefiningOp<arith::CmpIOp>().getRhs());
    if (!end || *end < start || next.getElseRegion().empty())
      return {};
    parts.push_back({*end - start, regionWork(next.getThenRegion(), sizes)});
    start = *end;
    block = &next.getElseRegion().front();
  }
}

/// One row of the report.
struct KernelRow {
  std::string name;
  /// The kinds of op the kernel computes (name locations, `+`-joined).
  std::string ops;
  /// Position in launch order.
  size_t order = 0;
  std::optional<int64_t> launches;
  std::array<std::optional<int64_t>, 3> grid, block;
  Work work;
  int64_t sharedBytes = 0;
  double estimate = 0;
  bool estimateKnown = false;
};

std::optional<int64_t> product(ArrayRef<std::optional<int64_t>> values) {
  int64_t result = 1;
  for (const std::optional<int64_t> &v : values) {
    if (!v)
      return std::nullopt;
    result *= *v;
  }
  return result;
}

std::string geometry(ArrayRef<std::optional<int64_t>> dims) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      dims, os,
      [&](const std::optional<int64_t> &d) {
        if (d)
          os << *d;
        else
          os << '?';
      },
      "x");
  return text;
}

std::string compact(double value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (value < 1e5)
    os << llvm::format("%.0f", value);
  else
    os << llvm::format("%.2e", value);
  return text;
}

/// The kernel launches of one call of a function: how many, and whether
/// that is a lower bound (a launch in a loop of unknown trip count, or a
/// call in a loop).
struct CallLaunches {
  int64_t count = 0;
  bool lowerBound = false;
  /// The buffers set by the driver (gpu.memset): nodes of a CUDA graph
  /// as launches are, though no kernel runs.
  int64_t memsets = 0;
};

struct SwitchyardGpuKernelReportPass
    : public switchyard::impl::SwitchyardGpuKernelReportPassBase<
          SwitchyardGpuKernelReportPass> {
  using Base::Base;

  void runOnOperation() override {
    if (dynamicSize < 1 || smCount < 1 || threadsPerSm < 1) {
      emitError(getOperation().getLoc())
          << "switchyard-gpu-kernel-report: dynamic-size, sm-count and "
             "threads-per-sm must be positive";
      return signalPassFailure();
    }
    std::vector<KernelRow> rows;
    // The first call of each function that is not public, and how many
    // times one call of the public functions calls it.
    DenseMap<Operation *, func::CallOp> callers;
    getOperation().walk([&](func::CallOp call) {
      if (auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
              call, call.getCalleeAttr());
          callee && !callee.isPublic())
        callers.try_emplace(callee, call);
    });
    DenseMap<Operation *, int64_t> calls;
    std::function<int64_t(func::FuncOp)> callsOf = [&](func::FuncOp func) {
      if (func.isPublic())
        return int64_t(1);
      if (auto known = calls.find(func); known != calls.end())
        return known->second;
      calls[func] = 0; // a recursive call counts nothing more
      int64_t count = 0;
      std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(func, getOperation());
      if (uses)
        for (const SymbolTable::SymbolUse &use : *uses)
          if (auto caller = use.getUser()->getParentOfType<func::FuncOp>())
            count += callsOf(caller);
      return calls[func] = count;
    };
    // Launches per call of each function: its own, then those of the
    // functions it calls (a training step calls its gradient function).
    llvm::MapVector<func::FuncOp, CallLaunches> perCall;
    getOperation().walk([&](func::FuncOp func) {
      SizeEvaluator sizes(dynamicSize, callers);
      CallLaunches &own = perCall[func];
      int64_t weight = callsOf(func);
      func.walk([&](gpu::LaunchOp launch) {
        KernelRow row = describe(launch, sizes, rows.size());
        if (row.launches)
          own.count += *row.launches;
        else
          own.lowerBound = true;
        // The table counts the launches of one call of the public functions.
        if (row.launches)
          row.launches = *row.launches * weight;
        row.estimate *= weight;
        rows.push_back(std::move(row));
      });
      func.walk([&](gpu::MemsetOp) { ++own.memsets; });
    });
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(output, &error);
    if (!file) {
      emitError(getOperation().getLoc())
          << "switchyard-gpu-kernel-report: " << error;
      return signalPassFailure();
    }
    print(rows, file->os());
    printLaunchesPerCall(perCall, file->os());
    file->keep();
    markAllAnalysesPreserved();
  }

  KernelRow describe(gpu::LaunchOp launch, SizeEvaluator &sizes,
                     size_t index) {
    KernelRow row;
    row.order = index;
    row.name = launch.getFunctionAttr()
                   ? launch.getFunctionAttr().getValue().str()
                   : ("launch #" + Twine(index)).str();
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
    row.grid = {sizes(grid.x), sizes(grid.y), sizes(grid.z)};
    row.block = {sizes(block.x), sizes(block.y), sizes(block.z)};
    if (Value shared = launch.getDynamicSharedMemorySize())
      row.sharedBytes = sizes(shared).value_or(0);
    // Host loops around the launch multiply it.
    int64_t launches = 1;
    bool launchesKnown = true;
    for (Operation *parent = launch->getParentOp();
         parent && !isa<func::FuncOp>(parent);
         parent = parent->getParentOp()) {
      if (auto loop = dyn_cast<scf::ForOp>(parent)) {
        if (std::optional<int64_t> trips = sizes.tripCount(loop))
          launches *= *trips;
        else
          launchesKnown = false;
      }
    }
    if (launchesKnown)
      row.launches = launches;
    row.work = regionWork(launch.getBody(), sizes);
    row.ops = opKinds(launch);
    std::optional<int64_t> blocks = product(row.grid);
    std::optional<int64_t> threads = product(row.block);
    SmallVector<MergedPart> parts = mergedParts(launch, sizes, blocks);
    if (!parts.empty() && threads) {
      // Each block runs its own body: the work per thread is the mean over
      // the blocks, the estimate the threads' work over the resident
      // threads, and at least the longest thread's.
      int64_t resident = smCount * threadsPerSm;
      double weighted = 0, longest = 0;
      Work mean;
      for (const MergedPart &part : parts) {
        double share = static_cast<double>(part.blocks) /
                       static_cast<double>(std::max<int64_t>(*blocks, 1));
        mean += part.work.scaled(share);
        weighted += static_cast<double>(part.blocks * *threads) *
                    part.work.total() / static_cast<double>(resident);
        longest = std::max(longest, part.work.total());
      }
      row.work = mean;
      row.estimate = std::max(weighted, longest) * row.launches.value_or(1);
      row.estimateKnown = true;
    } else if (blocks && threads) {
      // Waves: how many times the GPU's resident threads are filled.
      int64_t resident = smCount * threadsPerSm;
      double waves = static_cast<double>(
          llvm::divideCeil(*blocks * *threads, resident));
      row.estimate = waves * row.work.total() * row.launches.value_or(1);
      row.estimateKnown = true;
    }
    row.estimate +=
        lastBlockWork(launch, sizes).total() * row.launches.value_or(1);
    LLVM_DEBUG(llvm::dbgs() << row.name << " at " << launch.getLoc()
                            << ": grid " << geometry(row.grid) << ", block "
                            << geometry(row.block) << ", estimate "
                            << (row.estimateKnown ? compact(row.estimate)
                                                  : std::string("unknown"))
                            << "\n");
    return row;
  }

  /// One line: the launches of one call of each public function, the
  /// launches of the functions it calls included.
  void printLaunchesPerCall(
      const llvm::MapVector<func::FuncOp, CallLaunches> &own,
      raw_ostream &os) {
    llvm::DenseMap<func::FuncOp, CallLaunches> total;
    std::function<CallLaunches(func::FuncOp)> totalOf =
        [&](func::FuncOp func) -> CallLaunches {
      if (auto known = total.find(func); known != total.end())
        return known->second;
      // A recursive call counts nothing more.
      total[func] = CallLaunches{0, true};
      CallLaunches sum = own.lookup(func);
      func.walk([&](func::CallOp call) {
        auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
            call, call.getCalleeAttr());
        if (!callee || callee.isDeclaration())
          return;
        CallLaunches inner = totalOf(callee);
        sum.count += inner.count;
        sum.memsets += inner.memsets;
        sum.lowerBound |= inner.lowerBound ||
                          !isa<func::FuncOp>(call->getParentOp());
      });
      total[func] = sum;
      return sum;
    };
    // One line of launches, and one of memsets where a function has any.
    std::string memsets;
    llvm::raw_string_ostream memsetLine(memsets);
    os << "launches per call:";
    bool first = true;
    for (const auto &entry : own) {
      func::FuncOp func = entry.first;
      if (!func.isPublic() || func.isDeclaration())
        continue;
      CallLaunches launches = totalOf(func);
      os << (first ? " @" : ", @") << func.getSymName() << " "
         << launches.count << (launches.lowerBound ? "+" : "");
      first = false;
      if (launches.memsets)
        memsetLine << (memsets.empty() ? "memsets per call: @" : ", @")
                   << func.getSymName() << " " << launches.memsets;
    }
    os << (first ? " (no public function)\n" : "\n");
    if (!memsets.empty())
      os << memsets << "\n";
  }

  void print(std::vector<KernelRow> &rows, raw_ostream &os) {
    double total = 0;
    for (const KernelRow &row : rows)
      total += row.estimate;
    // Largest estimate first, launch order among equals.
    llvm::sort(rows, [](const KernelRow &a, const KernelRow &b) {
      return std::tie(b.estimate, a.order) < std::tie(a.estimate, b.order);
    });
    os << "kernel report: " << rows.size() << " launches in the IR; "
       << "dynamic sizes " << dynamicSize << ", " << smCount << " SMs x "
       << threadsPerSm << " threads\n"
       << "estimate = launches x waves x work per thread (operations + "
          "memory accesses, loops by trip count); static, not a time\n";
    os << llvm::format("%7s %6s %9s  %-15s %-11s %8s %10s %10s  %s  %s\n",
                       "share", "launch", "threads", "grid", "block",
                       "shared", "ops/thr", "mem/thr", "kernel", "computes");
    size_t shown = 0;
    for (const KernelRow &row : rows) {
      if (top > 0 && shown++ >= static_cast<size_t>(top))
        break;
      std::optional<int64_t> threads = product(row.block);
      std::optional<int64_t> blocks = product(row.grid);
      std::string share =
          row.estimateKnown && total > 0
              ? (llvm::formatv("{0:F1}%", 100.0 * row.estimate / total))
                    .str()
              : std::string("?");
      std::string launches =
          row.launches ? std::to_string(*row.launches) : std::string("?");
      std::string allThreads = blocks && threads
                                   ? compact(static_cast<double>(*blocks *
                                                                 *threads))
                                   : std::string("?");
      std::string trips = row.work.unknownTrips ? "+" : "";
      os << llvm::format("%7s %6s %9s  %-15s %-11s %8lld %10s %10s  %s  %s\n",
                         share.c_str(), launches.c_str(), allThreads.c_str(),
                         geometry(row.grid).c_str(),
                         geometry(row.block).c_str(),
                         static_cast<long long>(row.sharedBytes),
                         (compact(row.work.operations) + trips).c_str(),
                         (compact(row.work.memoryAccesses) + trips).c_str(),
                         row.name.c_str(), row.ops.c_str());
    }
    if (top > 0 && rows.size() > static_cast<size_t>(top))
      os << "(" << rows.size() - top << " more launches)\n";
    os << "?: unknown; +: a loop of unknown trip count counted once\n";
  }
};
} // namespace

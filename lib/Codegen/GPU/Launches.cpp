//===- Launches.cpp - what a kernel launch is and touches -----------------===//

#include "lib/Codegen/GPU/Launches.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using mlir::switchyard::LaunchInfo;
using mlir::switchyard::mayAlias;
using mlir::switchyard::viewedBuffer;

std::optional<int64_t> mlir::switchyard::constantIndex(Value value) {
  IntegerAttr attr;
  if (matchPattern(value, m_Constant(&attr)))
    return attr.getValue().getSExtValue();
  Operation *def = value.getDefiningOp();
  if (auto apply = dyn_cast_or_null<affine::AffineApplyOp>(def)) {
    Builder builder(value.getContext());
    SmallVector<Attribute> operands;
    for (Value operand : apply.getMapOperands()) {
      std::optional<int64_t> known = constantIndex(operand);
      if (!known)
        return std::nullopt;
      operands.push_back(builder.getIndexAttr(*known));
    }
    SmallVector<Attribute> folded;
    if (failed(apply.getAffineMap().constantFold(operands, folded)))
      return std::nullopt;
    return cast<IntegerAttr>(folded.front()).getInt();
  }
  if (isa_and_nonnull<arith::MulIOp, arith::AddIOp>(def)) {
    std::optional<int64_t> a = constantIndex(def->getOperand(0));
    std::optional<int64_t> b = constantIndex(def->getOperand(1));
    if (!a || !b)
      return std::nullopt;
    return isa<arith::MulIOp>(def) ? *a * *b : *a + *b;
  }
  return std::nullopt;
}

int64_t mlir::switchyard::parameterBytes(Value value) {
  if (auto memref = dyn_cast<MemRefType>(value.getType()))
    return 8 * (3 + 2 * memref.getRank());
  return 8;
}

FailureOr<LaunchInfo> mlir::switchyard::analyzeLaunch(gpu::LaunchOp launch) {
  LaunchInfo info;
  info.launch = launch;
  info.combinable = launch.getBody().hasOneBlock() && !launch.getAsyncToken() &&
                    launch.getWorkgroupAttributions().empty() &&
                    launch.getPrivateAttributions().empty() &&
                    !launch.hasClusterSize();
  if (Value shared = launch.getDynamicSharedMemorySize()) {
    std::optional<int64_t> known = constantIndex(shared);
    if (known)
      info.sharedBytes = *known;
    else
      info.combinable = false;
  }
  gpu::KernelDim3 sizes = launch.getBlockSizeOperandValues();
  std::array<Value, 3> blockSizes = {sizes.x, sizes.y, sizes.z};
  for (auto [i, size] : llvm::enumerate(blockSizes)) {
    std::optional<int64_t> known = constantIndex(size);
    if (!known)
      info.combinable = false;
    else
      info.block[i] = *known;
  }
  Region &body = launch.getBody();
  auto record = [&](MemoryEffects::Effect *effect, Value value) {
    Value root = viewedBuffer(value);
    if (switchyard::isOwnMemory(root, launch))
      return; // The thread's or the block's own memory.
    if (isa<MemoryEffects::Write>(effect))
      info.accesses.writes.push_back(root);
    else if (isa<MemoryEffects::Read>(effect))
      info.accesses.reads.push_back(root);
  };
  WalkResult walk = body.walk([&](Operation *op) {
    // A barrier or fence orders the accesses that the other ops declare;
    // mma.sync works on registers; ldmatrix declares a read without naming
    // its source.
    if (isa<gpu::BarrierOp, NVVM::MmaOp, NVVM::MembarOp>(op))
      return WalkResult::advance();
    if (auto load = dyn_cast<nvgpu::LdMatrixOp>(op)) {
      record(MemoryEffects::Read::get(), load.getSrcMemref());
      return WalkResult::advance();
    }
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects) {
      if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
          isa<gpu::TerminatorOp>(op))
        return WalkResult::advance();
      return WalkResult::interrupt();
    }
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &effect : instances) {
      Value value = effect.getValue();
      if (!value) {
        // An effect on memory it does not name: unknown, unless it only
        // allocates (within the thread).
        if (isa<MemoryEffects::Allocate, MemoryEffects::Free>(
                effect.getEffect()))
          continue;
        return WalkResult::interrupt();
      }
      // Memory named by something other than a buffer (a TMA descriptor
      // made on the host from one): which buffer is not known here.
      if (!isa<MemRefType>(value.getType()))
        return WalkResult::interrupt();
      record(effect.getEffect(), value);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  getUsedValuesDefinedAbove(body, info.captured);
  return info;
}

bool mlir::switchyard::canMoveLaunchesPast(Operation *op,
                                           const BufferAccesses &accesses) {
  if (isa<gpu::AllocOp, memref::AllocOp>(op))
    return true;
  if (isa<gpu::DeallocOp, memref::DeallocOp>(op)) {
    Value freed = viewedBuffer(op->getOperand(op->getNumOperands() - 1));
    auto touches = [&](Value v) { return mayAlias(v, freed); };
    return llvm::none_of(accesses.reads, touches) &&
           llvm::none_of(accesses.writes, touches);
  }
  return isMemoryEffectFree(op) && op->getNumRegions() == 0;
}

SmallVector<Block *> mlir::switchyard::hostBlocks(func::FuncOp func) {
  SmallVector<Block *> blocks;
  func.walk([&](Block *block) {
    Operation *parent = block->getParentOp();
    if (!isa<gpu::LaunchOp>(parent) &&
        !parent->getParentOfType<gpu::LaunchOp>())
      blocks.push_back(block);
  });
  return blocks;
}

Value mlir::switchyard::sharedMemoryView(OpBuilder &b, Location loc,
                                         ArrayRef<int64_t> shape, Type type,
                                         int64_t offset) {
  auto workgroup =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value shared = gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), AffineMap(),
                      workgroup));
  return memref::ViewOp::create(
      b, loc, MemRefType::get(shape, type, AffineMap(), workgroup), shared,
      arith::ConstantIndexOp::create(b, loc, offset), ValueRange{});
}

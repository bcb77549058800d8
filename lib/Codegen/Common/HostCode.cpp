//===- HostCode.cpp - what host code of the GPU target may do -------------===//
//
// The memory-access test, the viewed buffer and the aliasing of buffers of
// HostCode.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Codegen/Common/HostCode.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

bool switchyard::accessesBuffer(Operation *op, bool writesOnly,
                                function_ref<bool(Value)> accepts) {
  bool takesBuffer =
      llvm::any_of(op->getOperandTypes(), llvm::IsaPred<MemRefType>);
  if (auto iface = dyn_cast<MemoryEffectOpInterface>(op)) {
    SmallVector<MemoryEffects::EffectInstance> effects;
    iface.getEffects(effects);
    return llvm::any_of(effects, [&](const MemoryEffects::EffectInstance &e) {
      bool counted =
          writesOnly
              ? isa<MemoryEffects::Write>(e.getEffect())
              : isa<MemoryEffects::Read, MemoryEffects::Write>(e.getEffect());
      if (!counted)
        return false;
      Value value = e.getValue();
      return value ? accepts(value) : takesBuffer;
    });
  }
  // Region holders with recursive effects are decided by their nested ops.
  if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
    return false;
  // Unknown effects: conservatively, any op that takes a buffer.
  return takesBuffer;
}

bool switchyard::readsOrWritesMemory(Operation *op) {
  return accessesBuffer(op, /*writesOnly=*/false,
                        [](Value v) { return isa<MemRefType>(v.getType()); });
}

Value switchyard::viewedBuffer(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

bool switchyard::isOwnMemory(Value root, Operation *op) {
  return op->isAncestor(root.getParentRegion()->getParentOp());
}

bool switchyard::isFreshAllocation(Value root) {
  return isa_and_nonnull<gpu::AllocOp, memref::AllocOp>(root.getDefiningOp());
}

bool switchyard::mayAlias(Value a, Value b) {
  return a == b || (!isFreshAllocation(a) && !isFreshAllocation(b));
}

bool switchyard::independent(const BufferAccesses &a,
                             const BufferAccesses &b) {
  auto conflict = [](ArrayRef<Value> writes, const BufferAccesses &other) {
    for (Value w : writes) {
      for (Value v : other.reads)
        if (mayAlias(w, v))
          return true;
      for (Value v : other.writes)
        if (mayAlias(w, v))
          return true;
    }
    return false;
  };
  return !conflict(a.writes, b) && !conflict(b.writes, a);
}

bool switchyard::onlyAllocates(Operation *op) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return isMemoryEffectFree(op);
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffects(instances);
  return llvm::all_of(instances, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Allocate>(e.getEffect());
  });
}

bool switchyard::formsKernel(Operation *op) {
  if (op->getNumResults() != 0)
    return false;
  if (isa<linalg::LinalgOp, scf::ForallOp, scf::ParallelOp, scf::ForOp>(op))
    return true;
  return op->getDialect() && op->getDialect()->getNamespace() == "moe";
}

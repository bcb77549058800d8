//===- HostCode.cpp - what host code of the GPU target may do -------------===//
//
// The memory-access test of HostCode.h.
//
//===----------------------------------------------------------------------===//

#include "dialect/Gpu/Transforms/HostCode.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

bool switchyard::readsOrWritesMemory(Operation *op) {
  if (auto iface = dyn_cast<MemoryEffectOpInterface>(op)) {
    SmallVector<MemoryEffects::EffectInstance> effects;
    iface.getEffects(effects);
    return llvm::any_of(effects, [](const MemoryEffects::EffectInstance &e) {
      return isa<MemoryEffects::Read, MemoryEffects::Write>(e.getEffect());
    });
  }
  // Region holders with recursive effects are decided by their nested ops.
  if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
    return false;
  // Unknown effects: conservatively, any op that takes a buffer.
  return llvm::any_of(op->getOperandTypes(), llvm::IsaPred<MemRefType>);
}

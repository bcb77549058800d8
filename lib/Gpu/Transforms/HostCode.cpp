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
  bool takesBuffer =
      llvm::any_of(op->getOperandTypes(), llvm::IsaPred<MemRefType>);
  if (auto iface = dyn_cast<MemoryEffectOpInterface>(op)) {
    SmallVector<MemoryEffects::EffectInstance> effects;
    iface.getEffects(effects);
    // An effect on a named value counts when that value is a buffer; one on
    // no value (a resource as a whole) when the op takes a buffer. So
    // cf.assert, which writes its message, touches no buffer.
    return llvm::any_of(effects, [&](const MemoryEffects::EffectInstance &e) {
      if (!isa<MemoryEffects::Read, MemoryEffects::Write>(e.getEffect()))
        return false;
      Value value = e.getValue();
      return value ? isa<MemRefType>(value.getType()) : takesBuffer;
    });
  }
  // Region holders with recursive effects are decided by their nested ops.
  if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
    return false;
  // Unknown effects: conservatively, any op that takes a buffer.
  return takesBuffer;
}

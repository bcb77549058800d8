//===- SameFunctions.cpp - finding functions that compute the same --------===//

#include "lib/Codegen/Common/SameFunctions.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace {

/// A hash of `function`'s type and of the structure of its body (operation
/// names, attributes, result types, operand counts; not which values the
/// operands are): functions that OperationEquivalence finds equivalent hash
/// the same.
llvm::hash_code structuralHash(FunctionOpInterface function) {
  llvm::hash_code hash = hash_value(function.getFunctionType());
  function.getFunctionBody().walk([&](Operation *op) {
    hash = llvm::hash_combine(
        hash,
        OperationEquivalence::computeHash(
            op, OperationEquivalence::ignoreHashValue,
            OperationEquivalence::ignoreHashValue,
            OperationEquivalence::IgnoreLocations),
        op->getNumOperands(), op->getNumRegions());
    for (Region &region : op->getRegions())
      hash = llvm::hash_combine(hash, region.getBlocks().size());
  });
  return hash;
}

/// Whether `a` and `b` compute the same: same type, same attributes but
/// their names, equivalent bodies.
bool sameFunction(FunctionOpInterface a, FunctionOpInterface b) {
  if (a.getFunctionType() != b.getFunctionType())
    return false;
  auto otherAttributes = [](FunctionOpInterface function) {
    SmallVector<NamedAttribute> attributes;
    for (NamedAttribute attribute : function->getAttrs())
      if (attribute.getName() != SymbolTable::getSymbolAttrName())
        attributes.push_back(attribute);
    return attributes;
  };
  if (otherAttributes(a) != otherAttributes(b))
    return false;
  return OperationEquivalence::isRegionEquivalentTo(
      &a.getFunctionBody(), &b.getFunctionBody(),
      OperationEquivalence::IgnoreLocations);
}

} // namespace

FunctionOpInterface
switchyard::SameFunctions::findOrInsert(FunctionOpInterface function) {
  // Declarations have no body to compare.
  if (function.isExternal())
    return nullptr;
  SmallVector<FunctionOpInterface, 1> &candidates =
      byHash[structuralHash(function)];
  for (FunctionOpInterface candidate : candidates)
    if (sameFunction(candidate, function))
      return candidate;
  candidates.push_back(function);
  return nullptr;
}

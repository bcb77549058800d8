//===- MoeDialect.cpp - moe dialect registration --------------------------===//
//
// Registers the operations of the `moe` dialect.
//
//===----------------------------------------------------------------------===//

#include "dialect/Moe/IR/MoeDialect.h"
#include "dialect/Moe/IR/MoeInterfaces.h"
#include "dialect/Moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;

#include "dialect/Moe/IR/MoeInterfaces.cpp.inc"
#include "dialect/Moe/IR/MoeOpsDialect.cpp.inc"

void MoeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/Moe/IR/MoeOps.cpp.inc"
      >();
}

//===- SameFunctions.h - finding functions that compute the same -*- C++ -*-===//
//
// A model repeats its layers, and a training step contains its forward pass
// again: most of the loop nests and kernels it lowers to are copies of
// others. One structural comparison, shared by the CPU's loop outlining
// (switchyard-cpu-outline-loops), which calls the function of an identical
// nest, and the GPU target's kernel sharing (switchyard-gpu-share-kernels).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_SAMEFUNCTIONS_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_SAMEFUNCTIONS_H

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::switchyard {

/// The functions seen so far, by a hash of their structure.
class SameFunctions {
public:
  /// A function seen before that computes the same as `function` (same
  /// type, same attributes but its name, equivalent body up to locations),
  /// or null after recording `function` as the first of its kind; null for
  /// a declaration. Symbols are compared by name: the functions compared
  /// must resolve them in the same table.
  FunctionOpInterface findOrInsert(FunctionOpInterface function);

private:
  llvm::DenseMap<llvm::hash_code, llvm::SmallVector<FunctionOpInterface, 1>>
      byHash;
};

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_SAMEFUNCTIONS_H

//===- SplitModule.h - a compiled module in parts for parallel codegen -*- C++ -*-===//
//
// A compiled model is two kinds of code: straight lines (the entry points
// and layer blocks that switchyard-cpu-outline-loops marks optnone:
// allocations, calls, frees), which code generation at level 0 handles
// fastest, and loop nests, which LLVM optimises at the requested level.
// The loop nests move into modules of their own, each in a context of its
// own, so that they are optimised and compiled on other threads while the
// straight lines are compiled on this one.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_TARGET_LLVMIR_SPLITMODULE_H
#define SWITCHYARD_LIB_TARGET_LLVMIR_SPLITMODULE_H

#include <string>
#include <vector>

namespace llvm {
class Function;
class Module;
} // namespace llvm

namespace mlir::switchyard {

/// Whether `function` belongs with the straight lines: marked optnone or
/// always-inline (an entry point inlined into its C interface), or one of
/// the C interfaces and their packed entry points (`_mlir_...`).
bool isStraightLine(const llvm::Function &function);

/// Moves the definitions of the functions of `module` that are not
/// straight lines into at most `parts` modules, balanced by instruction
/// count, and returns them as bitcode (to be read into contexts of their
/// own); none when there are no such functions. `module` keeps
/// declarations of them and every global variable; a part gets its own
/// copy of each constant that its functions read (internal, so that its
/// optimiser sees the contents) and declarations of everything else. What
/// one side refers to on the other (the moved functions, the variables
/// they use) is made external, so that the objects link by name; the rest
/// keeps its linkage.
std::vector<std::string> splitOffLoopNests(llvm::Module &module,
                                           unsigned parts);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_TARGET_LLVMIR_SPLITMODULE_H

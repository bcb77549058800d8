//===- Outlining.h - ops into functions of their own ------------*- C++ -*-===//
//
// Moves one op of a function (or a few consecutive ones) into a new private
// function and calls it in its place, with the constants it uses cloned in
// (so that sizes and loop bounds stay constant in the new function) and
// every other value it uses from above passed as an argument. Shared by the CPU's loop outlining
// (switchyard-cpu-outline-loops) and the outlining of kernel-forming ops
// (switchyard-outline-ops).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_OUTLINING_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_OUTLINING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::switchyard {

/// The function and the call that outlineOp made.
struct OutlinedOp {
  func::FuncOp function;
  func::CallOp call;
};

/// Moves `op` (which must have no results) into a new private function
/// named `name` (unique in the enclosing symbol table), called where `op`
/// was. The constants `op` uses from above are cloned into the function;
/// every other value it uses from above becomes an argument, in the order
/// of first use. On failure the IR is left changed (the caller reports an
/// error and fails).
FailureOr<OutlinedOp> outlineOp(RewriterBase &rewriter, Operation *op,
                                StringRef name);

/// outlineOp for `ops`, consecutive ops of one block without results, into
/// one function.
FailureOr<OutlinedOp> outlineOps(RewriterBase &rewriter,
                                 ArrayRef<Operation *> ops, StringRef name);

/// `<prefix><N>` for the first N (counting from `next`, which is advanced)
/// that names no symbol in `symbolTableOp`.
std::string uniqueSymbolName(Operation *symbolTableOp, StringRef prefix,
                             unsigned &next);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_OUTLINING_H

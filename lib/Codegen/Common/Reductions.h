//===- Reductions.h - reductions that can be split ------------*- C++ -*-===//
//
// Reductions to one value of a static size, and the test that a reduction's
// combination can be split: its partial results combined in any grouping,
// starting from a neutral element. Shared by switchyard-fuse-rows,
// switchyard-split-whole-reductions (reductions to one value, by rows, on
// tensors) and switchyard-gpu-split-reductions (on buffers).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_REDUCTIONS_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_REDUCTIONS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace mlir::switchyard {

/// The number of elements `op` reduces to one value, where it is one: on
/// tensors, one output, every loop a reduction, all of static size.
std::optional<int64_t> wholeReductionElements(linalg::GenericOp op);

/// The op of `op`'s body that combines the accumulator of its one output
/// with one other value, where the body yields that op's result, the op has
/// a neutral element (arith.addf, arith.maximumf, arith.addi, ...) and
/// nothing else in the body reads the accumulator; null otherwise.
Operation *splittableCombiner(linalg::GenericOp op);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_REDUCTIONS_H

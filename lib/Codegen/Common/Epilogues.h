//===- Epilogues.h - elementwise work where a contraction stores -*- C++ -*-===//
//
// An epilogue is an elementwise linalg.generic that reads a contraction's
// result element by element (a bias, an activation, a residual add, a
// dropout), computed where the contraction's kernel stores that element
// instead of in a kernel of its own that reads the result back from memory.
// switchyard-mark-epilogues finds them on buffers and proves that the fusion
// keeps the program's meaning; the tensor-core matmul kernels
// (switchyard-gpu-tensor-core-matmul) build them into their stores.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_CODEGEN_COMMON_EPILOGUES_H
#define SWITCHYARD_LIB_CODEGEN_COMMON_EPILOGUES_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace mlir::switchyard {

/// The unit attribute that marks a linalg.generic as the epilogue of the
/// contraction right before it (switchyard-mark-epilogues).
constexpr llvm::StringLiteral kEpilogueAttr = "switchyard.epilogue";

/// Whether `consumer`, a linalg.generic on buffers, can be computed element
/// by element where a kernel stores the elements of `product`: every loop
/// parallel and one per dimension of `product`, at least one input that is
/// `product` read at the loop indices (the identity map), every other input
/// and every output through a map of the loop indices (outputs: a
/// permutation; `product` itself only at the loop indices), and a body
/// without memory effects or regions. Whether the buffers may alias is not
/// checked here (switchyard-mark-epilogues proves it).
bool isElementwiseEpilogue(Value product, linalg::GenericOp consumer);

/// `consumer` (isElementwiseEpilogue of `product`) at the loop point
/// `indices` (the indices of an element of `product`), with `value` as that
/// element: loads the other inputs there, computes the body, stores the
/// outputs. At the builder's insertion point; `consumer` stays.
void buildEpilogue(OpBuilder &b, Location loc, linalg::GenericOp consumer,
                   Value product, ValueRange indices, Value value);

/// The epilogue marked for the contraction `op`: the op right after it
/// when that is a linalg.generic with kEpilogueAttr and an elementwise
/// epilogue of `op`'s output (isElementwiseEpilogue); else null.
linalg::GenericOp markedEpilogue(linalg::LinalgOp op);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_CODEGEN_COMMON_EPILOGUES_H

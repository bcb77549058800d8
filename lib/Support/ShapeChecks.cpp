//===- ShapeChecks.cpp - Verifier helpers for shape contracts -------------===//
//
// Implements the shape-rule helpers used by the `moe` and `lm` verifiers.
//
//===----------------------------------------------------------------------===//

#include "dialect/Support/ShapeChecks.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::switchyard;

int64_t DimRef::size() const {
  return llvm::cast<ShapedType>(value.getType()).getDimSize(index);
}

std::string mlir::switchyard::formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      shape, os,
      [&](int64_t dim) {
        if (ShapedType::isDynamic(dim))
          os << '?';
        else
          os << dim;
      },
      "x");
  return text;
}

static void printDim(InFlightDiagnostic &diag, int64_t size) {
  if (ShapedType::isDynamic(size))
    diag << '?';
  else
    diag << size;
}

LogicalResult mlir::switchyard::verifySameDim(Operation *op, StringRef what,
                                              DimRef a, DimRef b) {
  int64_t x = a.size(), y = b.size();
  if (ShapedType::isDynamic(x) || ShapedType::isDynamic(y) || x == y)
    return success();
  InFlightDiagnostic diag = op->emitOpError()
                            << "expected " << what << " to agree: " << a.name
                            << " dim " << a.index << " is ";
  printDim(diag, x);
  diag << " but " << b.name << " dim " << b.index << " is ";
  printDim(diag, y);
  return diag;
}

LogicalResult mlir::switchyard::verifyShape(Operation *op, StringRef name,
                                            Type actual,
                                            ArrayRef<int64_t> expected,
                                            StringRef origin) {
  auto shaped = llvm::cast<ShapedType>(actual);
  ArrayRef<int64_t> found = shaped.getShape();
  bool ok = found.size() == expected.size() &&
            llvm::all_of(llvm::zip(found, expected), [](auto pair) {
              auto [f, e] = pair;
              return ShapedType::isDynamic(f) || ShapedType::isDynamic(e) ||
                     f == e;
            });
  if (ok)
    return success();
  return op->emitOpError() << "expected " << name << " of shape "
                           << formatShape(expected) << " (" << origin
                           << "), found " << formatShape(found);
}

LogicalResult mlir::switchyard::verifyShapeLimits(Operation *op) {
  auto check = [&](Type type, StringRef kind,
                   unsigned index) -> LogicalResult {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasRank())
      return success();
    int64_t elements = 1;
    bool within = true;
    for (int64_t size : shaped.getShape()) {
      if (ShapedType::isDynamic(size))
        continue;
      // Both factors are at most 2^36 here, so the product fits.
      within = size <= kMaxDimSize && (elements *= size) <= kMaxElements;
      if (!within)
        break;
    }
    if (within)
      return success();
    return op->emitOpError()
           << "expected " << kind << " #" << index
           << " within the dialect's size limits (dimensions up to "
           << kMaxDimSize << ", 2^36 elements), found " << type;
  };
  for (auto [index, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand", index)))
      return failure();
  for (auto [index, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result", index)))
      return failure();
  return success();
}

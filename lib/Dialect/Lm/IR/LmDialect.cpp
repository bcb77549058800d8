//===- LmDialect.cpp - lm dialect registration and attributes -------------===//
//
// Registers the `lm` dialect, and parses, prints and verifies its
// attributes (#lm.pos, #lm.init).
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/IR/LmDialect.h"
#include "dialect/Lm/IR/LmOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::lm;

#include "dialect/Lm/IR/LmDialect.cpp.inc"
#include "dialect/Lm/IR/LmEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/Lm/IR/LmAttrs.cpp.inc"

void LmDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/Lm/IR/LmAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialect/Lm/IR/LmOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

/// Whether an initialiser kind samples, and therefore needs a deviation.
static bool isRandom(InitKind kind) {
  return kind == InitKind::normal || kind == InitKind::row_normal;
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, APFloat std) {
  double value = std.convertToDouble();
  if (isRandom(kind) && !(value > 0.0))
    return emitError() << "initialiser '" << stringifyInitKind(kind)
                       << "' needs a positive std, found " << value;
  if (!isRandom(kind) && value != 0.0)
    return emitError() << "initialiser '" << stringifyInitKind(kind)
                       << "' takes no std";
  return success();
}

/// #lm.init<kind> or #lm.init<kind, std = value>.
Attribute InitAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc, "expected an initialiser kind (zeros, ones, "
                          "normal, row_normal), found '")
        << keyword << "'";
    return {};
  }
  double std = 0.0;
  if (succeeded(parser.parseOptionalComma()) &&
      (parser.parseKeyword("std") || parser.parseEqual() ||
       parser.parseFloat(std)))
    return {};
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), *kind, APFloat(std));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyInitKind(getKind());
  if (isRandom(getKind())) {
    printer << ", std = ";
    printer.printFloat(getStd());
  }
  printer << '>';
}

//===- Params.cpp - switchyard params -------------------------------------===//
//
// `switchyard params MODEL.mlir`: runs the front end on a model and lists
// the parameters it declares (`lm.param`): name, shape, element type,
// element count, initialiser and the official code's name where there is
// one, as a table or, with --json, a JSON object; then the total count.
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/Commands.h"
#include "tools/switchyard/Common.h"

#include "dialect/Lm/IR/LmOps.h"
#include "runtime/Params.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatAdapters.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>
#include <optional>

using namespace mlir;

namespace switchyard::driver {
namespace {

/// Reads the runtime's parameter table off the declared `lm.param`s.
FailureOr<rt::ParamTable> collectParams(ModuleOp module) {
  rt::ParamTable table;
  for (lm::ParamOp param : module.getOps<lm::ParamOp>()) {
    auto type = cast<RankedTensorType>(param.getType());
    std::string element;
    llvm::raw_string_ostream(element) << type.getElementType();
    std::optional<rt::DType> dtype = rt::parseDType(element);
    if (!dtype) {
      param.emitError() << "parameter element type " << type.getElementType()
                        << " is not supported by the runtime (f32, f16, bf16)";
      return failure();
    }
    lm::InitAttr init = param.getInit();
    table.params.push_back(
        {param.getSymName().str(),
         {type.getShape().begin(), type.getShape().end()},
         *dtype,
         *rt::parseInitKind(lm::stringifyInitKind(init.getKind())),
         init.getStd().convertToDouble(), param.getAlias().value_or("").str()});
  }
  return table;
}

std::string shapeString(const rt::ParamSpec &spec) {
  std::string text;
  for (size_t i = 0; i < spec.shape.size(); ++i)
    text += (i ? "x" : "") + std::to_string(spec.shape[i]);
  return text;
}

std::string initString(const rt::ParamSpec &spec) {
  std::string text(rt::toString(spec.init));
  if (spec.std > 0)
    text += llvm::formatv("(std={0})", llvm::format("%.4g", spec.std)).str();
  return text;
}

} // namespace

int runParams(int argc, char **argv) {
  static ModelOptions model;
  static cl::opt<bool> json(
      "json", cl::desc("Print a JSON object instead of a table"),
      cl::cat(model.category));
  registerCommandOptions(model.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard params: list the parameters a model owns\n\n"
      "Runs the front end on MODEL.mlir and prints each parameter's name (its\n"
      "key in checkpoints), shape, element count and initialiser, and the\n"
      "name the official SwitchHead or sigma-MoE code gives the same tensor\n"
      "where it has one (parameter files may use either name; see\n"
      "docs/Parameters.md), then the total parameter count.\n");

  if (llvm::Error error = model.check())
    return fail(std::move(error));
  MLIRContext context;
  setUpContext(context);
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  OwningOpRef<ModuleOp> module = loadModel(context, sources, model.input);
  if (!module || failed(runFrontend(*module, model.numLayers)))
    return 1;
  FailureOr<rt::ParamTable> table = collectParams(*module);
  if (failed(table))
    return 1;

  llvm::raw_ostream &os = llvm::outs();
  if (json) {
    llvm::json::Array params;
    for (const rt::ParamSpec &spec : table->params) {
      llvm::json::Object param{
          {"name", spec.name},
          {"shape", llvm::json::Array(spec.shape)},
          {"dtype", std::string(rt::toString(spec.dtype))},
          {"init", std::string(rt::toString(spec.init))},
          {"std", spec.std},
          {"elements", spec.numElements()}};
      if (!spec.alias.empty())
        param["official_name"] = spec.alias;
      params.push_back(std::move(param));
    }
    os << llvm::formatv("{0:2}\n", llvm::json::Value(llvm::json::Object{
                                       {"params", std::move(params)},
                                       {"total", table->totalElements()}}));
    return 0;
  }
  size_t nameWidth = 4;
  bool anyAlias = false;
  for (const rt::ParamSpec &spec : table->params) {
    nameWidth = std::max(nameWidth, spec.name.size());
    anyAlias |= !spec.alias.empty();
  }
  auto row = [&](StringRef name, StringRef shape, StringRef dtype,
                 StringRef elements, StringRef init, StringRef alias) {
    std::string line =
        llvm::formatv("{0} {1,-14} {2,-5} {3,12}  ",
                      llvm::fmt_align(name, llvm::AlignStyle::Left, nameWidth),
                      shape, dtype, elements)
            .str();
    line += anyAlias ? llvm::formatv("{0,-24} {1}", init, alias).str()
                     : init.str();
    os << StringRef(line).rtrim() << "\n";
  };
  row("name", "shape", "dtype", "elements", "init", "official name");
  for (const rt::ParamSpec &spec : table->params)
    row(spec.name, shapeString(spec), rt::toString(spec.dtype),
        std::to_string(spec.numElements()), initString(spec), spec.alias);
  if (table->totalElements() == std::numeric_limits<int64_t>::max())
    return fail(model.input + ": the parameter count exceeds 2^63 - 1");
  os << llvm::formatv("total: {0} tensors, {1} parameters ({2:f2}M)\n",
                      table->params.size(), table->totalElements(),
                      table->totalElements() / 1e6);
  return 0;
}

} // namespace switchyard::driver

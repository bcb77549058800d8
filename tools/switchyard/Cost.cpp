//===- Cost.cpp - switchyard cost -----------------------------------------===//
//
// `switchyard cost MODEL.mlir`: compiles a model through the front end and
// lm-decompose-layers and prints, per layer, the multiply-accumulates and
// the attention memory read from the compiled IR's shapes (the
// lm-cost-analysis pass) next to the SwitchHead paper's closed-form
// formulas, as tables or JSON; with --compare, two models and the ratios
// between them.
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/Commands.h"
#include "tools/switchyard/Common.h"

#include "dialect/Lm/IR/LmOps.h"
#include "dialect/Lm/Transforms/CostAnalysis.h"
#include "lib/Conversion/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

using namespace mlir;

namespace switchyard::driver {
namespace {

/// Loads `path`, runs the front end and lm-decompose-layers, and analyses
/// its model (the first lm.model). Reports errors on stderr.
FailureOr<lm::ModelCost> analyzeCost(MLIRContext &context, StringRef path,
                                     int64_t seqLen) {
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  OwningOpRef<ModuleOp> module = loadModel(context, sources, path);
  if (!module || failed(runFrontend(*module, 0)))
    return failure();
  auto models = module->getOps<lm::ModelOp>();
  if (models.empty()) {
    llvm::errs() << "switchyard: " << path << ": no lm.model\n";
    return failure();
  }
  lm::ModelOp model = *models.begin();
  auto tokens = cast<RankedTensorType>(model.getArgumentTypes().front());
  // Token ids [batch, time] or hidden states [batch, time, width].
  if (tokens.isDynamicDim(1)) {
    llvm::errs() << "switchyard: " << path
                 << ": the model's first argument needs a static sequence "
                    "length\n";
    return failure();
  }
  if (seqLen && seqLen != tokens.getDimSize(1)) {
    llvm::errs() << "switchyard: " << path << ": --seq-len " << seqLen
                 << " differs from the model's sequence length "
                 << tokens.getDimSize(1) << " (the costs are read from the "
                 << "compiled shapes; change the model to change T)\n";
    return failure();
  }
  PassManager pm(&context);
  pm.addPass(mlir::switchyard::createLmDecomposeLayersPass());
  if (failed(pm.run(*module)))
    return failure();
  FailureOr<lm::ModelCost> cost = lm::analyzeModelCost(model);
  if (succeeded(cost) && cost->saturated()) {
    llvm::errs() << "switchyard: " << path
                 << ": the model's counts exceed 2^63 - 1 and cannot be "
                    "shown\n";
    return failure();
  }
  return cost;
}

} // namespace

int runCost(int argc, char **argv) {
  static cl::OptionCategory category("Cost options");
  static cl::list<std::string> inputs(
      cl::Positional, cl::desc("<model.mlir> [<switchhead.mlir>]"),
      cl::OneOrMore, cl::cat(category));
  static cl::opt<bool> json(
      "json", cl::desc("Print JSON (an array with --compare) instead of tables"),
      cl::cat(category));
  static cl::opt<bool> compare(
      "compare",
      cl::desc("Two models, baseline first: print both reports and the "
               "ratios second / first of attention MACs and memory"),
      cl::cat(category));
  static cl::opt<int64_t> seqLen(
      "seq-len",
      cl::desc("Expected sequence length T (default: the model's; the "
               "analysis fails if the model's differs)"),
      cl::init(0), cl::cat(category));
  registerCommandOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard cost: MACs and attention memory of a model, per layer\n\n"
      "Compiles MODEL.mlir through the front end and lm-decompose-layers and\n"
      "counts, for one sequence of T tokens (batch 1, T from the model), the\n"
      "multiply-accumulates of every attention and feed-forward layer by role\n"
      "(q, k, v, o, pos projections, routers, QK^T, positional scores, A.V,\n"
      "gates; up/down) and the floats an attention layer keeps for the\n"
      "backward (attention matrices, Q, K, V, relative keys, head outputs,\n"
      "router scores), read from the compiled IR's shapes (the pass\n"
      "lm-cost-analysis). Next to each attention layer: the SwitchHead paper's\n"
      "closed-form formulas (arXiv 2312.07987) on the same dimensions. With\n"
      "--compare DENSE.mlir SWITCHHEAD.mlir (or any two models), also the\n"
      "ratios of attention MACs and memory, by the formulas and from the IR.\n"
      "docs/Cost.md, 'Cost accounting', explains where the two differ.\n");
  if (inputs.size() != (compare ? 2u : 1u)) {
    llvm::errs() << "switchyard cost: expected "
                 << (compare ? "two models with --compare" : "one model")
                 << ", got " << inputs.size() << "\n";
    return 1;
  }

  MLIRContext context;
  setUpContext(context);
  std::vector<lm::ModelCost> costs;
  for (const std::string &input : inputs) {
    FailureOr<lm::ModelCost> cost = analyzeCost(context, input, seqLen);
    if (failed(cost))
      return 1;
    costs.push_back(std::move(*cost));
  }
  llvm::raw_ostream &os = llvm::outs();
  if (json) {
    if (!compare) {
      os << llvm::formatv("{0:2}\n", lm::toJSON(costs[0]));
      return 0;
    }
    auto ratio = [](int64_t a, int64_t b) { return b ? double(a) / b : 0.0; };
    const lm::ModelCost &base = costs[0], &other = costs[1];
    os << llvm::formatv(
        "{0:2}\n",
        llvm::json::Value(llvm::json::Object{
            {"baseline", lm::toJSON(base)},
            {"candidate", lm::toJSON(other)},
            {"ratios",
             llvm::json::Object{
                 {"attention_formula_macs",
                  ratio(other.attentionFormulaMacs(),
                        base.attentionFormulaMacs())},
                 {"attention_formula_memory",
                  ratio(other.attentionFormulaMemory(),
                        base.attentionFormulaMemory())},
                 {"attention_macs",
                  ratio(other.attentionMacs(), base.attentionMacs())},
                 {"attention_memory",
                  ratio(other.attentionMemory(), base.attentionMemory())},
                 {"model_macs", ratio(other.totalMacs(), base.totalMacs())}}}}));
    return 0;
  }
  for (const lm::ModelCost &cost : costs)
    lm::printCostTable(os, cost);
  if (compare)
    lm::printCostComparison(os, costs[0], costs[1]);
  return 0;
}

} // namespace switchyard::driver

//===- Analysis.cpp - what a model computes on a window of text -----------===//

#include "runtime/Analysis.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

using namespace switchyard::runtime;

namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The router weight a selection's side reads, by the layer's parameter
/// names (lm-decompose-layers): its rows are heads × experts.
std::string routerParam(llvm::StringRef block, llvm::StringRef side) {
  if (side == "sel")
    return (block + ".sel").str();
  return (block + ".sel_" + side).str();
}

} // namespace

std::vector<float> BlockAnalysis::maxOverHeads() const {
  std::vector<float> result(size_t(queries * keys), 0.0f);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < queries * keys; ++i)
      result[i] = std::max(result[i], weights[h * queries * keys + i]);
  return result;
}

llvm::Expected<WindowAnalysis>
switchyard::runtime::analyzeWindow(LanguageModel &model,
                                   std::span<const int32_t> tokens) {
  const FunctionSpec &function = model.function;
  if (llvm::none_of(function.results, [](const TensorSpec &result) {
        return !result.probe.empty();
      }))
    return failure("@" + function.name +
                   " returns no probes: compile it with probes "
                   "(CompileOptions::probes)");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= model.vocab)
      return failure(llvm::formatv(
          "token {0} at position {1} is outside the vocabulary [0, {2})",
          tokens[i], i, model.vocab));
  llvm::Expected<std::vector<HostTensor>> results = model.run(tokens);
  if (!results)
    return results.takeError();

  WindowAnalysis window;
  window.tokens.assign(tokens.begin(), tokens.end());
  int64_t length = static_cast<int64_t>(tokens.size());
  int64_t context = model.context;
  if (!model.memories.empty())
    window.memory = model.memories.front().shape[1];
  std::map<std::string, size_t> blockIndex;
  auto block = [&](llvm::StringRef name) -> BlockAnalysis & {
    auto [it, added] = blockIndex.try_emplace(name.str(), window.blocks.size());
    if (added) {
      window.blocks.emplace_back();
      window.blocks.back().name = name.str();
    }
    return window.blocks[it->second];
  };
  // Gates and experts of one side arrive as two results.
  std::map<std::string, const HostTensor *> gates;
  for (auto [spec, result] : llvm::zip_equal(function.results, *results)) {
    llvm::StringRef probe = spec.probe;
    if (probe.empty())
      continue;
    if (probe.consume_back(".attention.weights")) {
      // [1, H, T, S]: the window's queries, all memory keys and the
      // window's keys.
      BlockAnalysis &b = block(probe);
      int64_t heads = result.shape[1], keys = result.shape[3];
      int64_t memory = keys - context;
      b.heads = heads;
      b.queries = length;
      b.keys = memory + length;
      std::span<const float> values = result.values<float>();
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < length; ++t) {
          auto row = values.subspan((h * context + t) * keys, b.keys);
          b.weights.insert(b.weights.end(), row.begin(), row.end());
        }
    } else if (probe.consume_back(".gates")) {
      gates[probe.str()] = &result;
    } else if (probe.consume_back(".experts")) {
      auto [name, side] = probe.rsplit('.');
      auto found = gates.find(probe.str());
      if (found == gates.end())
        return failure("probe '" + spec.probe +
                       "' comes without its gates before it");
      const HostTensor &values = *found->second;
      // [N, H, k] (SwitchHead) or [N, k] (σ-MoE) over the batch of one
      // window's tokens: the memory's, then the window's (value side), or
      // the window's.
      Selection selection;
      selection.side = side.str();
      int64_t rows = result.shape[0];
      selection.heads = result.shape.size() == 3 ? result.shape[1] : 1;
      selection.k = result.shape.back();
      int64_t memory = rows - context;
      selection.tokens = memory + length;
      if (const ParamSpec *router =
              model.program.params().find(routerParam(name, side)))
        selection.experts = router->shape[0] / selection.heads;
      int64_t width = selection.heads * selection.k;
      std::span<const float> g = values.values<float>();
      for (int64_t i = 0; i < selection.tokens * width; ++i) {
        selection.gates.push_back(g[i]);
        selection.chosen.push_back(
            result.type == ElementType::i64
                ? static_cast<int32_t>(result.values<int64_t>()[i])
                : result.values<int32_t>()[i]);
      }
      block(name).selections.push_back(std::move(selection));
    } else {
      return failure("probe '" + spec.probe + "' is of no kind analyze reads");
    }
  }
  return window;
}

//===- Analysis.h - what a model computes on a window of text ---*- C++ -*-===//
//
// `switchyard analyze`'s data: a model compiled with CompileOptions::probes
// returns, after its own results, each attention block's softmax weights
// and each router's top-k gates and experts (lm-expose-probes). This runs
// one window of text through such a model and gathers them per block, cut
// to the window's tokens (the padding after them, which causal attention
// keeps from them, is dropped).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_ANALYSIS_H
#define SWITCHYARD_RUNTIME_ANALYSIS_H

#include "runtime/Generation.h"

#include "llvm/Support/Error.h"

#include <span>
#include <string>
#include <vector>

namespace switchyard::runtime {

/// One router's choices on the window: for each of its tokens, the k
/// experts of each head (highest score first) and their gates.
struct Selection {
  /// "v" (SwitchHead's value side: over the memory tokens, then the
  /// window's), "o" (its output side) or "sel" (a σ-MoE feed-forward).
  std::string side;
  int64_t tokens = 0, heads = 1, k = 0;
  /// The experts each head chooses from (their count per head).
  int64_t experts = 0;
  /// [tokens, heads, k] each.
  std::vector<int32_t> chosen;
  std::vector<float> gates;
};

/// One block's probes.
struct BlockAnalysis {
  /// The layer name (`layers.0.att`).
  std::string name;
  /// Attention blocks: the weights [heads, queries, keys] of the window's
  /// queries over its keys (the memory's, then the window's); 0 where a
  /// query does not see a key. Empty for feed-forward blocks.
  int64_t heads = 0, queries = 0, keys = 0;
  std::vector<float> weights;
  std::vector<Selection> selections;

  /// max over heads of the weights: [queries, keys].
  std::vector<float> maxOverHeads() const;
};

/// A window of text through a model.
struct WindowAnalysis {
  std::vector<int32_t> tokens;
  /// The memory tokens before the window (Transformer-XL; zeros: the
  /// window is the text's first segment).
  int64_t memory = 0;
  std::vector<BlockAnalysis> blocks;
};

/// Runs `tokens` (1 to the context's length) through `model`, whose
/// function was compiled with probes, with zero memories; the blocks in the
/// order of their first probe. An error if the function has no probes.
llvm::Expected<WindowAnalysis> analyzeWindow(LanguageModel &model,
                                             std::span<const int32_t> tokens);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_ANALYSIS_H

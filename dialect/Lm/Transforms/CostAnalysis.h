//===- CostAnalysis.h - MACs and attention memory of a model ----*- C++ -*-===//
//
// The cost accounting behind `lm-cost-analysis` and `switchyard cost`: for
// one sequence (batch 1), the multiply-accumulates of every attention and
// feed-forward layer, split by role, and the floats an attention layer keeps
// for the backward pass, read off the shapes of a decomposed model (after
// lm-decompose-layers), next to the closed-form formulas of the SwitchHead
// paper (arXiv 2312.07987) evaluated on the same layer dimensions.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_LM_TRANSFORMS_COSTANALYSIS_H
#define SWITCHYARD_DIALECT_LM_TRANSFORMS_COSTANALYSIS_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlir::lm {

/// The kinds of layers the cost analysis recognises.
enum class CostLayerKind { DenseAttention, SwitchHead, Ffn, SigmaMoe, Output };

/// The dimensions of one layer, read from the shapes of its ops. Attention:
/// width d, queries T, keys S (T plus the XL memory), heads H of width F,
/// E experts per head and k active (SwitchHead). Feed-forward: d, T, the
/// hidden width F (d_ff, or the expert width), E experts and k active.
struct LayerDims {
  int64_t d = 0, tokens = 0, keys = 0, heads = 0, width = 0, experts = 0,
          k = 0;
  /// Transformer-XL relative positions (a `rel` operand of moe.attention).
  bool relative = false;
};

/// The cost of one layer. `macs` and `memory` are IR-derived, as (role,
/// count) pairs in a fixed order; `formulaMacs` and `formulaMemory` are the
/// paper's closed forms on `dims` (0 where there is none).
struct LayerCost {
  std::string name;
  CostLayerKind kind;
  LayerDims dims;
  SmallVector<std::pair<std::string, int64_t>> macs, memory;
  int64_t formulaMacs = 0, formulaMemory = 0;

  int64_t totalMacs() const;
  int64_t totalMemory() const;
  bool isAttention() const {
    return kind == CostLayerKind::DenseAttention ||
           kind == CostLayerKind::SwitchHead;
  }
};

/// The cost of a whole model for one sequence.
struct ModelCost {
  std::string name;
  int64_t seqLen = 0;
  std::vector<LayerCost> layers;

  /// Sums over the attention (or the feed-forward) layers. They saturate
  /// at the largest int64_t instead of wrapping.
  int64_t attentionMacs() const, attentionMemory() const,
      attentionFormulaMacs() const, attentionFormulaMemory() const,
      ffnMacs() const, totalMacs() const;
  /// Whether a total reached the largest int64_t (and is no count).
  bool saturated() const;
};

/// The paper's per-layer attention formulas (docs/Cost.md, "The formulas")
/// with S = T(1 + c) keys; without relative positions (RoPE) the
/// positional terms are dropped. `dims.experts == 0` selects the dense one.
int64_t attentionFormulaMacs(const LayerDims &dims);
int64_t attentionFormulaMemory(const LayerDims &dims);

/// Analyses the decomposed model `model` (an lm.model after
/// lm-decompose-layers, parameters still read by lm.get_param). Layers are
/// named after their parameters (`layers.3.att`). Dynamic batch dimensions
/// are bound to 1. Emits an error on `model` and fails when a shape cannot
/// be resolved or a layer is not recognised.
FailureOr<ModelCost> analyzeModelCost(Operation *model);

/// The report as JSON: per layer the dimensions, the IR-derived MACs and
/// memory by role with totals, the formulas; per model the totals.
llvm::json::Value toJSON(const ModelCost &cost);

/// A human-readable table: one row per layer, then the model totals.
void printCostTable(llvm::raw_ostream &os, const ModelCost &cost);

/// The ratios `candidate` / `baseline` of attention MACs and memory, both
/// IR-derived and by the formulas.
void printCostComparison(llvm::raw_ostream &os, const ModelCost &baseline,
                         const ModelCost &candidate);

} // namespace mlir::lm

#endif // SWITCHYARD_DIALECT_LM_TRANSFORMS_COSTANALYSIS_H

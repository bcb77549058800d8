//===- LmCostAnalysis.cpp - MACs and attention memory of a model ----------===//
//
// Implements the cost accounting of dialect/Lm/Transforms/CostAnalysis.h and
// the `lm-cost-analysis` pass that reports it. The counts come from the
// shapes of the ops lm-decompose-layers emits (moe.linear, moe.gate,
// moe.expert_proj, moe.expert_merge, moe.expert_mlp, moe.attention); each op
// is attributed to the layer that owns its weight (`layers.3.att.q` belongs
// to `layers.3.att`). Dynamic dimensions are resolved through the reshapes
// that produced them, with the batch bound to 1.
//
//===----------------------------------------------------------------------===//

#include "dialect/Lm/Transforms/CostAnalysis.h"

#include "dialect/Lm/IR/LmOps.h"
#include "dialect/Lm/Transforms/Passes.h"
#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/ToolOutputFile.h"

#include <limits>

namespace mlir::lm {
#define GEN_PASS_DEF_LMCOSTANALYSISPASS
#include "dialect/Lm/Transforms/Passes.h.inc"
} // namespace mlir::lm

#define DEBUG_TYPE "lm-cost-analysis"

using namespace mlir;
using namespace mlir::lm;

//===----------------------------------------------------------------------===//
// Formulas
//===----------------------------------------------------------------------===//

// With S = T(1 + c) keys, T²(1 + c) = T·S. The SwitchHead formula's
// positional term has no (1 + c) factor, the dense one has; both follow the
// paper's script (docs/Cost.md, "The formulas"). E in the router terms is
// the number of experts per head, as in that script.
int64_t lm::attentionFormulaMacs(const LayerDims &dims) {
  int64_t d = dims.d, t = dims.tokens, s = dims.keys, h = dims.heads,
          f = dims.width;
  int64_t core = 2 * h * f * t * s;
  if (dims.experts == 0) {
    int64_t macs = core + 4 * d * h * f * t;
    if (dims.relative)
      macs += 2 * h * d * s * f;
    return macs;
  }
  int64_t k = dims.k, e = dims.experts;
  int64_t macs = core + (2 * k + 2) * d * h * f * t + 2 * h * k * t * f +
                 2 * e * d * s;
  if (dims.relative)
    macs += 2 * h * d * t * f;
  return macs;
}

int64_t lm::attentionFormulaMemory(const LayerDims &dims) {
  int64_t t = dims.tokens, s = dims.keys, h = dims.heads, f = dims.width;
  int64_t memory = 2 * h * t * s + 4 * h * f * t;
  if (dims.experts == 0)
    return dims.relative ? memory + 2 * h * f * s : memory;
  memory += 2 * dims.experts * s;
  return dims.relative ? memory + 2 * h * t * f : memory;
}

/// Feed-forward closed forms (not in the paper's table): 2·d·d_ff·T for a
/// dense block, 2·k·g·d·T + E·d·T (experts and router) for σ-MoE.
static int64_t ffnFormulaMacs(const LayerDims &dims) {
  if (dims.experts == 0)
    return 2 * dims.d * dims.width * dims.tokens;
  return 2 * dims.k * dims.width * dims.d * dims.tokens +
         dims.experts * dims.d * dims.tokens;
}

//===----------------------------------------------------------------------===//
// Totals
//===----------------------------------------------------------------------===//

/// a + b, or the largest int64_t where that overflows: totals that reach it
/// are reported as too large (ModelCost::saturated), never wrapped.
static int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t result;
  if (llvm::AddOverflow(a, b, result))
    return std::numeric_limits<int64_t>::max();
  return result;
}

static int64_t sum(ArrayRef<std::pair<std::string, int64_t>> entries) {
  int64_t total = 0;
  for (const auto &entry : entries)
    total = saturatingAdd(total, entry.second);
  return total;
}

int64_t LayerCost::totalMacs() const { return sum(macs); }
int64_t LayerCost::totalMemory() const { return sum(memory); }

template <typename Fn>
static int64_t sumLayers(const ModelCost &cost, bool attention, Fn fn) {
  int64_t total = 0;
  for (const LayerCost &layer : cost.layers)
    if (layer.isAttention() == attention && layer.kind != CostLayerKind::Output)
      total = saturatingAdd(total, fn(layer));
  return total;
}

int64_t ModelCost::attentionMacs() const {
  return sumLayers(*this, true, [](auto &l) { return l.totalMacs(); });
}
int64_t ModelCost::attentionMemory() const {
  return sumLayers(*this, true, [](auto &l) { return l.totalMemory(); });
}
int64_t ModelCost::attentionFormulaMacs() const {
  return sumLayers(*this, true, [](auto &l) { return l.formulaMacs; });
}
int64_t ModelCost::attentionFormulaMemory() const {
  return sumLayers(*this, true, [](auto &l) { return l.formulaMemory; });
}
int64_t ModelCost::ffnMacs() const {
  return sumLayers(*this, false, [](auto &l) { return l.totalMacs(); });
}
int64_t ModelCost::totalMacs() const {
  int64_t total = 0;
  for (const LayerCost &layer : layers)
    total = saturatingAdd(total, layer.totalMacs());
  return total;
}

bool ModelCost::saturated() const {
  return totalMacs() == std::numeric_limits<int64_t>::max() ||
         attentionMemory() == std::numeric_limits<int64_t>::max() ||
         attentionFormulaMacs() == std::numeric_limits<int64_t>::max() ||
         attentionFormulaMemory() == std::numeric_limits<int64_t>::max();
}

//===----------------------------------------------------------------------===//
// Analysis
//===----------------------------------------------------------------------===//

namespace {

/// Resolves the dynamic dimensions of tensors in a decomposed model, binding
/// the batch dimension of the model's arguments to 1: through
/// tensor.collapse_shape / expand_shape (products of the grouped
/// dimensions), moe.concat (times add) and moe.embed (the token ids'
/// shape); any other op's dynamic dimension is the one of an operand of the
/// same type, or, for the leading (token) dimension, of its first operand
/// with a dynamic leading dimension.
class DimResolver {
public:
  FailureOr<int64_t> dim(Value value, unsigned index) {
    auto type = cast<ShapedType>(value.getType());
    if (!type.isDynamicDim(index))
      return type.getDimSize(index);
    auto key = std::make_pair(value, index);
    auto it = memo.find(key);
    if (it != memo.end())
      return it->second;
    FailureOr<int64_t> size = resolve(value, index);
    if (succeeded(size))
      memo[key] = *size;
    return size;
  }

private:
  FailureOr<int64_t> resolve(Value value, unsigned index) {
    if (isa<BlockArgument>(value)) {
      if (index == 0)
        return int64_t(1);
      return failure();
    }
    Operation *op = value.getDefiningOp();
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
      int64_t size = 1;
      for (int64_t source : collapse.getReassociationIndices()[index]) {
        FailureOr<int64_t> part = dim(collapse.getSrc(), source);
        if (failed(part))
          return failure();
        size *= *part;
      }
      return size;
    }
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
      auto groups = expand.getReassociationIndices();
      for (auto [source, group] : llvm::enumerate(groups)) {
        if (!llvm::is_contained(group, int64_t(index)))
          continue;
        FailureOr<int64_t> total = dim(expand.getSrc(), source);
        if (failed(total))
          return failure();
        int64_t others = 1;
        for (int64_t i : group) {
          if (i == int64_t(index))
            continue;
          if (expand.getResultType().isDynamicDim(i))
            return failure();
          others *= expand.getResultType().getDimSize(i);
        }
        return *total / others;
      }
      return failure();
    }
    if (auto concat = dyn_cast<moe::ConcatOp>(op)) {
      FailureOr<int64_t> first = dim(op->getOperand(0), index);
      if (failed(first) || index != 1)
        return first;
      FailureOr<int64_t> second = dim(op->getOperand(1), index);
      if (failed(second))
        return failure();
      return *first + *second;
    }
    if (auto embed = dyn_cast<moe::EmbedOp>(op))
      if (index < 2)
        return dim(embed.getTokens(), index);
    for (Value operand : op->getOperands())
      if (operand.getType() == value.getType())
        return dim(operand, index);
    if (index == 0)
      for (Value operand : op->getOperands())
        if (auto shaped = dyn_cast<ShapedType>(operand.getType()))
          if (shaped.hasRank() && shaped.getRank() > 0 &&
              shaped.isDynamicDim(0))
            return dim(operand, 0);
    return failure();
  }

  DenseMap<std::pair<Value, unsigned>, int64_t> memo;
};

/// Accumulates the costs of a model's layers, in the order of first use.
class CostBuilder {
public:
  explicit CostBuilder(Operation *model) : model(model) {}

  FailureOr<ModelCost> run();

private:
  /// The (layer, role) of a weight read by lm.get_param, e.g.
  /// ("layers.0.att", "q"); nullopt for anything else.
  static std::optional<std::pair<StringRef, StringRef>> paramOf(Value weight) {
    auto read = weight.getDefiningOp<GetParamOp>();
    if (!read)
      return std::nullopt;
    return read.getName().rsplit('.');
  }

  LayerCost &layer(StringRef name, Operation *op) {
    auto [it, inserted] = layers.try_emplace(name);
    if (inserted) {
      it->second.name = name.str();
      it->second.kind = CostLayerKind::Output;
      anchors[name.str()] = op;
    }
    return it->second;
  }

  static void add(SmallVectorImpl<std::pair<std::string, int64_t>> &entries,
                  StringRef role, int64_t count) {
    for (auto &entry : entries)
      if (entry.first == role) {
        entry.second = saturatingAdd(entry.second, count);
        return;
      }
    entries.emplace_back(role.str(), count);
  }

  FailureOr<int64_t> dim(Operation *op, Value value, unsigned index) {
    FailureOr<int64_t> size = dims.dim(value, index);
    if (failed(size))
      op->emitError("lm-cost-analysis: cannot resolve dynamic dimension ")
          << index << " of an operand of this op (only the batch dimension "
          << "of the model's arguments may be dynamic)";
    return size;
  }

  static int64_t size(Value value) {
    return cast<ShapedType>(value.getType()).getNumElements();
  }

  LogicalResult visit(moe::LinearOp op);
  LogicalResult visit(moe::GateOp op);
  LogicalResult visit(moe::ExpertProjOp op);
  LogicalResult visit(moe::ExpertMergeOp op);
  LogicalResult visit(moe::ExpertMlpOp op);
  LogicalResult visit(moe::AttentionOp op);

  Operation *model;
  DimResolver dims;
  llvm::MapVector<StringRef, LayerCost> layers;

public:
  llvm::StringMap<Operation *> anchors;
};

} // namespace

LogicalResult CostBuilder::visit(moe::LinearOp op) {
  auto param = paramOf(op.getWeight());
  if (!param)
    return op.emitError("lm-cost-analysis: the weight of this projection is "
                        "not read by lm.get_param; run the analysis after "
                        "lm-decompose-layers, before convert-lm-to-func");
  auto [name, role] = *param;
  FailureOr<int64_t> n = dim(op, op.getInput(), 0);
  if (failed(n))
    return failure();
  auto weight = cast<ShapedType>(op.getWeight().getType());
  int64_t out = weight.getDimSize(0), in = weight.getDimSize(1);
  LayerCost &cost = layer(name, op);
  int64_t macs = *n * in * out;
  if (role == "q" || role == "k" || role == "v" || role == "o" ||
      role == "pos") {
    if (cost.kind != CostLayerKind::SwitchHead)
      cost.kind = CostLayerKind::DenseAttention;
    add(cost.macs, role, macs);
    if (role == "q") {
      cost.dims.d = in;
    }
    if (role != "o")
      add(cost.memory, role == "pos" ? "rel" : role, *n * out);
    return success();
  }
  if (role == "up" || role == "down") {
    cost.kind = CostLayerKind::Ffn;
    add(cost.macs, role, macs);
    if (role == "up") {
      cost.dims.d = in;
      cost.dims.tokens = *n;
      cost.dims.width = out;
      add(cost.memory, "hidden", *n * out);
    }
    return success();
  }
  add(cost.macs, "proj", macs);
  cost.dims.d = in;
  cost.dims.tokens = *n;
  cost.dims.width = out;
  return success();
}

LogicalResult CostBuilder::visit(moe::GateOp op) {
  auto param = paramOf(op.getWeight());
  if (!param)
    return op.emitError("lm-cost-analysis: the router weight is not read by "
                        "lm.get_param");
  FailureOr<int64_t> n = dim(op, op.getInput(), 0);
  if (failed(n))
    return failure();
  auto weight = cast<ShapedType>(op.getWeight().getType());
  int64_t g = weight.getDimSize(0), d = weight.getDimSize(1);
  LayerCost &cost = layer(param->first, op);
  add(cost.macs, "router", *n * d * g);
  add(cost.memory, "router_scores", *n * g);
  return success();
}

LogicalResult CostBuilder::visit(moe::ExpertProjOp op) {
  auto param = paramOf(op.getWeight());
  if (!param)
    return op.emitError("lm-cost-analysis: the expert weight is not read by "
                        "lm.get_param");
  FailureOr<int64_t> n = dim(op, op.getInput(), 0);
  if (failed(n))
    return failure();
  auto weight = cast<ShapedType>(op.getWeight().getType());
  auto gates = cast<ShapedType>(op.getGates().getType());
  int64_t h = gates.getDimSize(1), k = gates.getDimSize(2);
  int64_t d = weight.getDimSize(1), f = weight.getDimSize(2);
  LayerCost &cost = layer(param->first, op);
  cost.kind = CostLayerKind::SwitchHead;
  cost.dims.experts = weight.getDimSize(0) / h;
  cost.dims.k = k;
  add(cost.macs, "v", *n * h * k * d * f);
  add(cost.macs, "gates", *n * h * k * f);
  add(cost.memory, "v", *n * h * f);
  return success();
}

LogicalResult CostBuilder::visit(moe::ExpertMergeOp op) {
  auto param = paramOf(op.getWeight());
  if (!param)
    return op.emitError("lm-cost-analysis: the expert weight is not read by "
                        "lm.get_param");
  FailureOr<int64_t> n = dim(op, op.getHeads(), 0);
  if (failed(n))
    return failure();
  auto weight = cast<ShapedType>(op.getWeight().getType());
  auto gates = cast<ShapedType>(op.getGates().getType());
  int64_t h = gates.getDimSize(1), k = gates.getDimSize(2);
  int64_t f = weight.getDimSize(1), d = weight.getDimSize(2);
  LayerCost &cost = layer(param->first, op);
  cost.kind = CostLayerKind::SwitchHead;
  add(cost.macs, "o", *n * h * k * f * d);
  // The gate scales the F-wide head vector of each route; the projection is
  // linear, so scaling before or after it is the same result.
  add(cost.macs, "gates", *n * h * k * f);
  return success();
}

LogicalResult CostBuilder::visit(moe::ExpertMlpOp op) {
  auto param = paramOf(op.getUp());
  if (!param)
    return op.emitError("lm-cost-analysis: the expert weight is not read by "
                        "lm.get_param");
  FailureOr<int64_t> n = dim(op, op.getInput(), 0);
  if (failed(n))
    return failure();
  auto up = cast<ShapedType>(op.getUp().getType());
  auto gates = cast<ShapedType>(op.getGates().getType());
  int64_t e = up.getDimSize(0), d = up.getDimSize(1), g = up.getDimSize(2);
  int64_t k = gates.getDimSize(1);
  LayerCost &cost = layer(param->first, op);
  cost.kind = CostLayerKind::SigmaMoe;
  cost.dims = {d, *n, 0, 0, g, e, k, false};
  add(cost.macs, "up", *n * k * d * g);
  add(cost.macs, "down", *n * k * g * d);
  add(cost.macs, "gates", *n * k * d);
  add(cost.memory, "hidden", *n * k * g);
  return success();
}

LogicalResult CostBuilder::visit(moe::AttentionOp op) {
  // The layer of the queries' projection, through the head split and RoPE.
  Value query = op.getQuery();
  while (Operation *def = query.getDefiningOp()) {
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, moe::RopeOp>(def)) {
      query = def->getOperand(0);
      continue;
    }
    break;
  }
  auto projection = query.getDefiningOp<moe::LinearOp>();
  auto param = projection ? paramOf(projection.getWeight()) : std::nullopt;
  if (!param)
    return op.emitError("lm-cost-analysis: cannot find the query projection "
                        "of this attention");
  FailureOr<int64_t> b = dim(op, op.getQuery(), 0);
  FailureOr<int64_t> t = dim(op, op.getQuery(), 1);
  FailureOr<int64_t> s = dim(op, op.getKey(), 1);
  if (failed(b) || failed(t) || failed(s))
    return failure();
  auto queryType = cast<ShapedType>(op.getQuery().getType());
  int64_t h = queryType.getDimSize(2), f = queryType.getDimSize(3);
  LayerCost &cost = layer(param->first, op);
  if (cost.kind != CostLayerKind::SwitchHead)
    cost.kind = CostLayerKind::DenseAttention;
  cost.dims.tokens = *b * *t;
  cost.dims.keys = *b * *s;
  cost.dims.heads = h;
  cost.dims.width = f;
  cost.dims.relative = bool(op.getRel());
  int64_t product = *b * *t * *s * h * f;
  add(cost.macs, "qk", product);
  if (op.getRel())
    add(cost.macs, "pos_scores", product);
  add(cost.macs, "av", product);
  // Logits and softmax weights, one [T, S] matrix each per head.
  add(cost.memory, "attention_matrices", 2 * *b * h * *t * *s);
  add(cost.memory, "heads", *b * *t * h * f);
  return success();
}

FailureOr<ModelCost> CostBuilder::run() {
  ModelCost cost;
  if (auto symbol = dyn_cast<SymbolOpInterface>(model))
    cost.name = symbol.getName().str();
  WalkResult result = model->walk([&](Operation *op) {
    LogicalResult visited =
        TypeSwitch<Operation *, LogicalResult>(op)
            .Case<moe::LinearOp, moe::GateOp, moe::ExpertProjOp,
                  moe::ExpertMergeOp, moe::ExpertMlpOp, moe::AttentionOp>(
                [&](auto op) { return visit(op); })
            .Case<moe::FusedRouterOp, moe::FusedExpertProjOp,
                  moe::FusedExpertMergeOp, moe::FlashAttentionOp>(
                [&](Operation *op) {
                  return op->emitError("lm-cost-analysis: run the analysis "
                                       "before the moe fusions");
                })
            .Case<ParamOwnerOpInterface>([&](Operation *op) {
              return op->emitError("lm-cost-analysis: run the analysis after "
                                   "lm-decompose-layers");
            })
            .Default([](Operation *) { return success(); });
    return failed(visited) ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  for (auto &[name, layer] : layers) {
    if (layer.isAttention()) {
      if (layer.dims.heads == 0)
        return model->emitError("lm-cost-analysis: attention layer '")
               << name << "' has no moe.attention";
      layer.formulaMacs = attentionFormulaMacs(layer.dims);
      layer.formulaMemory = attentionFormulaMemory(layer.dims);
    } else if (layer.kind == CostLayerKind::Ffn ||
               layer.kind == CostLayerKind::SigmaMoe) {
      layer.formulaMacs = ffnFormulaMacs(layer.dims);
    }
    if (layer.dims.tokens > cost.seqLen)
      cost.seqLen = layer.dims.tokens;
    cost.layers.push_back(layer);
  }
  return cost;
}

FailureOr<ModelCost> lm::analyzeModelCost(Operation *model) {
  return CostBuilder(model).run();
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

static StringRef kindName(CostLayerKind kind) {
  switch (kind) {
  case CostLayerKind::DenseAttention:
    return "dense-attention";
  case CostLayerKind::SwitchHead:
    return "switchhead";
  case CostLayerKind::Ffn:
    return "ffn";
  case CostLayerKind::SigmaMoe:
    return "sigma-moe";
  case CostLayerKind::Output:
    return "output";
  }
  llvm_unreachable("unknown layer kind");
}

/// 5368709120 as "5.37G", 3461120 as "3.46M".
static std::string human(int64_t count) {
  double value = double(count);
  if (value >= 1e9)
    return llvm::formatv("{0:f2}G", value / 1e9).str();
  if (value >= 1e6)
    return llvm::formatv("{0:f2}M", value / 1e6).str();
  if (value >= 1e3)
    return llvm::formatv("{0:f2}K", value / 1e3).str();
  return std::to_string(count);
}

static llvm::json::Object
entriesToJSON(ArrayRef<std::pair<std::string, int64_t>> entries) {
  llvm::json::Object object;
  for (const auto &[role, count] : entries)
    object[role] = count;
  return object;
}

llvm::json::Value lm::toJSON(const ModelCost &cost) {
  llvm::json::Array layers;
  for (const LayerCost &layer : cost.layers) {
    const LayerDims &d = layer.dims;
    llvm::json::Object object{
        {"name", layer.name},
        {"kind", kindName(layer.kind)},
        {"dims",
         llvm::json::Object{{"d", d.d},
                            {"tokens", d.tokens},
                            {"keys", d.keys},
                            {"heads", d.heads},
                            {"width", d.width},
                            {"experts", d.experts},
                            {"k", d.k},
                            {"relative", d.relative}}},
        {"macs", entriesToJSON(layer.macs)},
        {"memory", entriesToJSON(layer.memory)},
        {"total_macs", layer.totalMacs()},
        {"total_memory", layer.totalMemory()}};
    if (layer.formulaMacs)
      object["formula_macs"] = layer.formulaMacs;
    if (layer.formulaMemory)
      object["formula_memory"] = layer.formulaMemory;
    layers.push_back(std::move(object));
  }
  return llvm::json::Object{
      {"model", cost.name},
      {"seq_len", cost.seqLen},
      {"batch", 1},
      {"layers", std::move(layers)},
      {"totals",
       llvm::json::Object{
           {"attention_macs", cost.attentionMacs()},
           {"attention_memory", cost.attentionMemory()},
           {"attention_formula_macs", cost.attentionFormulaMacs()},
           {"attention_formula_memory", cost.attentionFormulaMemory()},
           {"ffn_macs", cost.ffnMacs()},
           {"macs", cost.totalMacs()}}}};
}

void lm::printCostTable(llvm::raw_ostream &os, const ModelCost &cost) {
  os << llvm::formatv("model @{0}: one sequence of {1} tokens (batch 1); "
                      "MACs and attention memory (floats kept for the "
                      "backward), from the IR and by the paper's formulas\n",
                      cost.name, cost.seqLen);
  os << llvm::formatv("{0,-16} {1,-15} {2,14} {3,14} {4,12} {5,12}\n",
                      "layer", "kind", "MACs", "MACs formula", "memory",
                      "mem formula");
  auto optional = [](int64_t value) {
    return value ? std::to_string(value) : std::string("-");
  };
  for (const LayerCost &layer : cost.layers) {
    os << llvm::formatv("{0,-16} {1,-15} {2,14} {3,14} {4,12} {5,12}\n",
                        layer.name, kindName(layer.kind), layer.totalMacs(),
                        optional(layer.formulaMacs),
                        optional(layer.totalMemory()),
                        optional(layer.formulaMemory));
    auto list = [&](StringRef title,
                    ArrayRef<std::pair<std::string, int64_t>> entries) {
      if (entries.empty())
        return;
      os << "    " << title << ":";
      for (const auto &[role, count] : entries)
        os << " " << role << " " << count;
      os << "\n";
    };
    list("MACs", layer.macs);
    list("memory", layer.memory);
  }
  int64_t attentionLayers = llvm::count_if(
      cost.layers, [](const LayerCost &layer) { return layer.isAttention(); });
  os << llvm::formatv(
      "attention ({0} layers): MACs {1} ({2}), formula {3} ({4}); memory {5} "
      "({6}), formula {7} ({8})\n",
      attentionLayers, cost.attentionMacs(), human(cost.attentionMacs()),
      cost.attentionFormulaMacs(), human(cost.attentionFormulaMacs()),
      cost.attentionMemory(), human(cost.attentionMemory()),
      cost.attentionFormulaMemory(), human(cost.attentionFormulaMemory()));
  if (attentionLayers)
    os << llvm::formatv(
        "attention per layer: MACs {0}, formula {1}; memory {2}, formula "
        "{3}\n",
        human(cost.attentionMacs() / attentionLayers),
        human(cost.attentionFormulaMacs() / attentionLayers),
        human(cost.attentionMemory() / attentionLayers),
        human(cost.attentionFormulaMemory() / attentionLayers));
  os << llvm::formatv("feed-forward: MACs {0} ({1})\n", cost.ffnMacs(),
                      human(cost.ffnMacs()));
  os << llvm::formatv("model: MACs {0} ({1})\n", cost.totalMacs(),
                      human(cost.totalMacs()));
}

void lm::printCostComparison(llvm::raw_ostream &os, const ModelCost &baseline,
                             const ModelCost &candidate) {
  auto ratio = [](int64_t numerator, int64_t denominator) {
    double percent = denominator ? 100.0 * numerator / denominator : 0.0;
    return llvm::formatv("{0:f2}% ({1:f0}%)", percent, percent).str();
  };
  os << llvm::formatv("@{0} / @{1}, attention, one sequence:\n",
                      candidate.name, baseline.name);
  os << "  MACs   (formula): "
     << ratio(candidate.attentionFormulaMacs(), baseline.attentionFormulaMacs())
     << "\n";
  os << "  memory (formula): "
     << ratio(candidate.attentionFormulaMemory(),
              baseline.attentionFormulaMemory())
     << "\n";
  os << "  MACs   (IR):      "
     << ratio(candidate.attentionMacs(), baseline.attentionMacs()) << "\n";
  os << "  memory (IR):      "
     << ratio(candidate.attentionMemory(), baseline.attentionMemory()) << "\n";
  os << "  model MACs (IR):  "
     << ratio(candidate.totalMacs(), baseline.totalMacs()) << "\n";
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
/// Reports the cost of every decomposed model in the module as remarks (and
/// as JSON with `json-file`); the IR is left unchanged.
struct LmCostAnalysisPass
    : public lm::impl::LmCostAnalysisPassBase<LmCostAnalysisPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::json::Array models;
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      CostBuilder builder(model);
      FailureOr<ModelCost> cost = builder.run();
      if (failed(cost))
        return signalPassFailure();
      LLVM_DEBUG(llvm::dbgs()
                 << "@" << cost->name << ": " << cost->layers.size()
                 << " layers, T = " << cost->seqLen << "\n");
      for (const LayerCost &layer : cost->layers) {
        InFlightDiagnostic remark =
            builder.anchors.lookup(layer.name)->emitRemark()
            << layer.name << ": " << kindName(layer.kind) << ", "
            << layer.totalMacs() << " MACs";
        if (layer.formulaMacs)
          remark << " (formula " << layer.formulaMacs << ")";
        if (layer.isAttention())
          remark << ", " << layer.totalMemory() << " floats kept (formula "
                 << layer.formulaMemory << ")";
      }
      model.emitRemark() << "@" << cost->name << ": attention "
                         << cost->attentionMacs() << " MACs (formula "
                         << cost->attentionFormulaMacs() << "), "
                         << cost->attentionMemory() << " floats (formula "
                         << cost->attentionFormulaMemory() << "); model "
                         << cost->totalMacs() << " MACs";
      models.push_back(lm::toJSON(*cost));
    }
    if (!jsonFile.empty()) {
      std::string error;
      std::unique_ptr<llvm::ToolOutputFile> out =
          openOutputFile(jsonFile, &error);
      if (!out) {
        getOperation().emitError("lm-cost-analysis: cannot write '")
            << jsonFile << "': " << error;
        return signalPassFailure();
      }
      out->os() << llvm::formatv("{0:2}\n",
                                 llvm::json::Value(std::move(models)));
      out->os().flush();
      if (std::error_code ec = out->os().error()) {
        // Reported here, not as LLVM's fatal error when the stream closes.
        out->os().clear_error();
        getOperation().emitError("lm-cost-analysis: cannot write '")
            << jsonFile << "': " << ec.message();
        return signalPassFailure();
      }
      out->keep();
    }
    markAllAnalysesPreserved();
  }
};
} // namespace

//===- LayerBench.cpp - one SwitchHead layer against its peers ------------===//
//
// The default benchmark of switchyard-bench: one attention layer (token
// embedding, lm.switchhead with its Transformer-XL memory, cross-entropy
// over its D output channels), forward and forward + backward, compiled by
// Switchyard (fused and unfused) for the CPU or the GPU, against the plain
// C++ reference (forward), the dense multi-head attention layer with the
// same parameter count (compiled by Switchyard), and PyTorch
// (bench/torch_switchhead.py) implementing both layers, all on the same
// parameters and inputs in the same run.
//
//===----------------------------------------------------------------------===//

#include "bench/Bench.h"
#include "dialect/Lm/Transforms/CostAnalysis.h"
#include "lib/Reference/Reference.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <random>

using namespace switchyard;
using namespace switchyard::bench;
using llvm::formatv;

namespace {

/// One attention layer's shape (the SwitchHead paper's configurations,
/// arXiv 2312.07987, as in examples/models/), and the dense baseline's heads
/// of the same parameter count.
struct Config {
  std::string name;
  int64_t width, heads, experts, k, headDim, time, denseHeads, denseHeadDim;
};

const Config kConfigs[] = {
    {"tiny", 128, 2, 5, 3, 32, 128, 4, 48},
    {"47m", 412, 2, 5, 3, 76, 256, 10, 41},
    {"262m", 1024, 4, 4, 2, 112, 512, 16, 64},
};
constexpr int64_t kVocab = 256;

enum class Kind { SwitchHead, Dense };

std::string modelSource(const Config &c, int64_t batch, Kind kind) {
  std::string x = formatv("tensor<{0}x{1}x{2}xf32>", batch, c.time, c.width);
  std::string layer =
      kind == Kind::SwitchHead
          ? formatv("lm.switchhead \"att\" %x memory(%mem : {0}) {{heads = "
                    "{1}, experts = {2}, k = {3}, head_dim = {4}, pos = "
                    "#lm.pos<xl>} : {0}",
                    x, c.heads, c.experts, c.k, c.headDim)
                .str()
          : formatv("lm.mha \"att\" %x memory(%mem : {0}) {{heads = {1}, "
                    "head_dim = {2}, pos = #lm.pos<xl>} : {0}",
                    x, c.denseHeads, c.denseHeadDim)
                .str();
  return formatv("lm.model @layer(%tokens: tensor<{0}x{1}xi32>, %mem: {2}) "
                 "-> ({2}, {2}) {{\n"
                 "  %x = lm.embed \"embed\" %tokens {{vocab = {3}} : "
                 "tensor<{0}x{1}xi32> -> {2}\n"
                 "  %y = {4}\n"
                 "  lm.return %y, %x : {2}, {2}\n"
                 "}\n",
                 batch, c.time, x, kVocab, layer);
}

/// The layer's multiply-accumulates for one sequence by the paper's
/// formulas (what `switchyard cost` reports for it): every query against
/// every key, as the paper counts.
int64_t layerMacs(const Config &c, Kind kind) {
  mlir::lm::LayerDims dims;
  dims.d = c.width;
  dims.tokens = c.time;
  dims.keys = 2 * c.time;
  dims.relative = true;
  if (kind == Kind::SwitchHead) {
    dims.heads = c.heads;
    dims.width = c.headDim;
    dims.experts = c.experts;
    dims.k = c.k;
  } else {
    dims.heads = c.denseHeads;
    dims.width = c.denseHeadDim;
  }
  return mlir::lm::attentionFormulaMacs(dims);
}

/// The inputs every implementation of one layer gets.
struct Inputs {
  std::vector<rt::HostTensor> params; // in the program's declaration order
  rt::HostTensor tokens, targets, memory;
};

Inputs makeInputs(const rt::Program &program, const Config &c,
                  int64_t batch) {
  Inputs in;
  in.params = initialParams(program, /*seed=*/1);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, kVocab - 1),
      target(0, int32_t(c.width - 1));
  std::vector<int32_t> tokens(size_t(batch * c.time)), targets(tokens.size());
  for (auto [t, y] : llvm::zip(tokens, targets)) {
    t = token(rng);
    y = target(rng);
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> memory(size_t(batch * c.time * c.width));
  for (float &m : memory)
    m = normal(rng);
  in.tokens = rt::HostTensor::fromValues<int32_t>(
      "tokens", rt::ElementType::i32, {batch, c.time}, tokens);
  in.targets = rt::HostTensor::fromValues<int32_t>(
      "targets", rt::ElementType::i32, {batch, c.time}, targets);
  in.memory = rt::HostTensor::fromValues<float>(
      "memory", rt::ElementType::f32, {batch, c.time, c.width}, memory);
  return in;
}

/// Compiles the layer with `fuse` and times its forward and `_grad`; makes
/// the inputs from the first program compiled when `inputs` has none.
Measurement measureSwitchyard(const Options &options, const Config &c,
                              Kind kind, llvm::StringRef fuse, Inputs &inputs,
                              double &compileMs) {
  std::string source = modelSource(c, options.batch, kind);
  std::unique_ptr<rt::Program> program =
      compile(options, source,
              kind == Kind::SwitchHead ? "switchhead-layer.mlir"
                                       : "dense-layer.mlir",
              compileOptions(options, fuse), compileMs);
  if (inputs.params.empty())
    inputs = makeInputs(*program, c, options.batch);
  std::vector<const rt::HostTensor *> forward = {&inputs.tokens,
                                                 &inputs.memory};
  for (const rt::HostTensor &p : inputs.params)
    forward.push_back(&p);
  std::vector<const rt::HostTensor *> grad = forward;
  grad.push_back(&inputs.targets);

  Measurement m;
  // The dense layer has no experts: only its attention can be fused.
  std::string label =
      kind == Kind::SwitchHead ? fusionLabel(options, fuse)
      : compileOptions(options, fuse).fusion->attention ? "attention fused"
                                                       : "unfused";
  m.name = formatv("switchyard {0}({1})",
                   kind == Kind::SwitchHead ? "" : "dense MHA ", label);
  std::vector<rt::HostTensor> results;
  m.forwardMs = timeCall(options, *program, "layer", forward, results);
  m.fwdbwdMs = timeCall(options, *program, "layer_grad", grad, results);
  m.loss = results[0].values<float>()[0];
  for (auto [index, p] : llvm::enumerate(inputs.params))
    m.gradNorms[p.name] = l2(results[1 + index]);
  return m;
}

Measurement measureReference(const Options &options, const Config &c,
                             const Inputs &in) {
  std::map<std::string, ref::Tensor> p;
  for (const rt::HostTensor &t : in.params)
    p[t.name] = toReference(t);
  ref::SwitchHeadParams sh;
  sh.norm = {p.at("att.norm.weight"), p.at("att.norm.bias")};
  sh.q = p.at("att.q");
  sh.k = p.at("att.k");
  sh.v = p.at("att.v");
  sh.o = p.at("att.o");
  sh.sel_v = p.at("att.sel_v");
  sh.sel_o = p.at("att.sel_o");
  sh.pos = p.at("att.pos");
  ref::IndexTensor tokens{{options.batch, c.time}, {}}, targets = tokens;
  for (int32_t t : in.tokens.values<int32_t>())
    tokens.data.push_back(t);
  for (int32_t t : in.targets.values<int32_t>())
    targets.data.push_back(t);
  ref::Tensor memory = toReference(in.memory);
  ref::Tensor y;
  Measurement m;
  m.name = "C++ reference (CPU)";
  m.forwardMs = medianMs(options.reps, [&] {
    y = ref::switchHeadBlock(ref::embed(tokens, p.at("embed.weight")), sh,
                             c.heads, c.experts, c.k, c.headDim, ref::Pos::xl,
                             &memory);
  });
  m.loss = ref::crossEntropy(y, targets);
  return m;
}

/// Writes the inputs as .npy and config.json into `dir` for the script.
void exportInputs(const Options &options, llvm::StringRef dir,
                  const Config &c, Kind kind, const Inputs &in) {
  llvm::json::Array names;
  for (const rt::HostTensor &p : in.params) {
    names.push_back(p.name);
    writeNpyInto(dir, p);
  }
  for (const rt::HostTensor *t : {&in.tokens, &in.targets, &in.memory})
    writeNpyInto(dir, *t);
  bool switchHead = kind == Kind::SwitchHead;
  llvm::json::Object config{
      {"layer", "att"},
      {"kind", switchHead ? "switchhead" : "dense"},
      {"params", std::move(names)},
      {"batch", options.batch},
      {"time", c.time},
      {"width", c.width},
      {"heads", switchHead ? c.heads : c.denseHeads},
      {"head_dim", switchHead ? c.headDim : c.denseHeadDim},
      {"pos", "xl"},
      {"memory", true},
      {"reps", int64_t(options.reps)},
      {"threads", 1}};
  if (switchHead) {
    config["experts"] = c.experts;
    config["k"] = c.k;
  }
  writeJson((dir + "/config.json").str(), std::move(config));
}

/// Runs bench/torch_switchhead.py on the exported layer; one row per
/// formulation it measured.
std::vector<Measurement> measureTorch(const Options &options,
                                      llvm::StringRef dir, unsigned threads,
                                      std::string &version) {
  std::vector<std::string> args = {dir.str(), std::to_string(threads)};
  llvm::append_range(args, torchDeviceArguments(options));
  llvm::json::Object report = runPython(options, options.layerScript, args);
  version = report.getString("torch").value_or("?").str();
  std::string where =
      options.gpu()
          ? formatv("{0}, {1}", report.getString("device").value_or("cuda"),
                    report.getString("dtype").value_or("?"))
                .str()
          : formatv("{0} thread{1}", threads, threads == 1 ? "" : "s").str();
  std::vector<Measurement> rows = torchRows(report, "");
  if (rows.empty())
    fail(options.layerScript + " reported no results");
  for (Measurement &m : rows)
    m.name += ", " + where;
  return rows;
}

/// The PyTorch rows for one layer kind, cross-checked against `base` (a
/// copy: `rows` grows).
void addTorchRows(const Options &options, const Config &c, Kind kind,
                  const Inputs &inputs, Measurement base,
                  std::vector<Measurement> &rows, std::string &version) {
  llvm::SmallString<128> dir = peerDirectory();
  exportInputs(options, dir, c, kind, inputs);
  for (unsigned n : torchThreadCounts(options))
    for (Measurement &m : measureTorch(options, dir, n, version)) {
      if (kind == Kind::Dense)
        m.name = "dense MHA: " + m.name;
      crossCheck(base, m, lossTolerance(options), gradTolerance(options));
      rows.push_back(std::move(m));
    }
  llvm::sys::fs::remove_directories(dir);
}

} // namespace

int bench::runLayer(const Options &options) {
  const Config *config = llvm::find_if(
      kConfigs, [&](const Config &c) { return c.name == options.config; });
  if (config == std::end(kConfigs))
    fail("unknown --config '" + options.config + "' (tiny, 47m or 262m)");
  const Config &c = *config;
  llvm::outs() << formatv(
      "SwitchHead layer, {0} configuration: D {1}, {2} heads x {3}, {4} "
      "experts, k {5}, T {6} + XL memory {6}; batch {7}\n"
      "dense MHA layer of the same parameter count: {8} heads x {9}\n{10}\n\n",
      c.name, c.width, c.heads, c.headDim, c.experts, c.k, c.time,
      options.batch, c.denseHeads, c.denseHeadDim, describeBackend(options));
  llvm::outs().flush();

  Inputs inputs, denseInputs;
  double denseCompileMs = 0;
  std::vector<Measurement> rows;
  const double lossTol = lossTolerance(options), gradTol = gradTolerance(options);
  // The device's default fusions first (what `switchyard train` compiles),
  // then all and none, where the default is not already one of them.
  using mlir::switchyard::FusionOptions;
  const FusionOptions byDefault = FusionOptions::targetDefault(target(options));
  // Each setting's row label and compile time, in the rows' order.
  std::vector<std::pair<std::string, double>> compileMs;
  // On the CPU also the unfused route with dense expert projections (its
  // default groups them); on the GPU the default is the grouped route and
  // `none` the dense one.
  // Then the default with the mission's fusions (router and expert
  // projections) where the default lacks them.
  for (llvm::StringRef fuse :
       {"default", "all", "none", "dense", kMoeFusion.data()}) {
    if (fuse == kDenseExperts) {
      if (options.gpu())
        continue;
    } else if (fuse == kMoeFusion) {
      if (byDefault.router && byDefault.expertProjection)
        continue;
    } else if (fuse != "default" && check(mlir::switchyard::resolveFusions(
                                              fuse, "default", target(options)),
                                          "--fuse") == byDefault) {
      continue;
    }
    double ms = 0;
    rows.push_back(
        measureSwitchyard(options, c, Kind::SwitchHead, fuse, inputs, ms));
    compileMs.emplace_back(fusionLabel(options, fuse), ms);
    if (rows.size() > 1)
      crossCheck(rows[0], rows.back(), lossTol, gradTol);
  }
  if (!options.skipReference) {
    rows.push_back(measureReference(options, c, inputs));
    crossCheck(rows[0], rows.back(), lossTol, gradTol);
  }
  std::string torchVersion;
  if (!options.python.empty())
    addTorchRows(options, c, Kind::SwitchHead, inputs, rows[0], rows,
                 torchVersion);
  Measurement dense = measureSwitchyard(options, c, Kind::Dense, "default",
                                        denseInputs, denseCompileMs);
  rows.push_back(dense);
  if (!options.python.empty())
    addTorchRows(options, c, Kind::Dense, denseInputs, dense, rows,
                 torchVersion);

  // FLOPs per call: 2 per multiply-accumulate; forward + backward counted
  // as three forward passes (two matmuls per matmul in the backward pass).
  const double flops = 2.0 * double(options.batch) *
                       double(layerMacs(c, Kind::SwitchHead));
  const double denseFlops =
      2.0 * double(options.batch) * double(layerMacs(c, Kind::Dense));
  const Measurement &ours = rows[0];
  llvm::outs() << formatv("{0,-60} {1,11} {2,11} {3,9} {4,9} {5,10}\n", "",
                          "forward ms", "fwd+bwd ms", "fwd ratio", "f+b ratio",
                          "f+b TFLOP/s");
  bool mismatched = false;
  for (const Measurement &m : rows) {
    bool isDense = llvm::StringRef(m.name).contains("dense MHA");
    double tflops = 3.0 * (isDense ? denseFlops : flops) / (m.fwdbwdMs * 1e9);
    if (!m.mismatch.empty()) {
      mismatched = true;
      llvm::outs() << formatv("{0,-60} MISMATCH: {1}\n", m.name, m.mismatch);
      continue;
    }
    llvm::outs() << formatv(
        "{0,-60} {1,11:F2} {2,11:F2} {3,9} {4,9} {5,10}\n", m.name, m.forwardMs,
        m.fwdbwdMs, ratio(m.forwardMs, ours.forwardMs),
        ratio(m.fwdbwdMs, ours.fwdbwdMs),
        std::isnan(tflops) ? std::string("-")
                           : formatv("{0:F3}", tflops).str());
  }
  llvm::outs() << formatv(
      "\nratio: the row's time over the first row's ({8}); above 1: "
      "switchyard is faster.\nThe SwitchHead rows compute loss {0:F6} and "
      "the dense rows {1:F6}: every implementation\nof a layer is "
      "cross-checked against the first of its kind (loss to {2:e1} relative, "
      "gradient\nnorms to {3:e1}). FLOPs: {4:F3} GFLOP (SwitchHead) and "
      "{5:F3} GFLOP (dense) per forward\npass by the paper's formulas "
      "(all T x S query-key pairs); fwd+bwd counted as 3 forward.\n"
      "compile time (definition to callable code, forward and _grad): "
      "SwitchHead {6}; dense {7:F0} ms\n",
      ours.loss, dense.loss, lossTol, gradTol, flops / 1e9, denseFlops / 1e9,
      llvm::join(llvm::map_range(compileMs,
                                 [](const auto &entry) {
                                   return formatv("{0:F0} ms {1}",
                                                  entry.second, entry.first)
                                       .str();
                                 }),
                 ", "),
      denseCompileMs, ours.name);
  if (!torchVersion.empty())
    llvm::outs() << "PyTorch " << torchVersion << "\n";

  if (!options.jsonOut.empty()) {
    llvm::json::Object compiles;
    for (const auto &[label, ms] : compileMs)
      compiles[label] = ms;
    llvm::json::Array entries;
    for (const Measurement &m : rows)
      entries.push_back(llvm::json::Object{{"name", m.name},
                                           {"forward_ms", number(m.forwardMs)},
                                           {"fwdbwd_ms", number(m.fwdbwdMs)},
                                           {"loss", number(m.loss)},
                                           {"mismatch", m.mismatch}});
    writeJson(options.jsonOut,
              llvm::json::Object{{"config", c.name},
                                 {"batch", options.batch},
                                 {"backend", describeBackend(options)},
                                 {"torch", torchVersion},
                                 {"forward_flops", flops},
                                 {"dense_forward_flops", denseFlops},
                                 {"compile_ms", std::move(compiles)},
                                 {"compile_ms_dense", denseCompileMs},
                                 {"rows", std::move(entries)}});
  }
  if (mismatched)
    fail("some implementations computed something else (MISMATCH above)");
  return 0;
}

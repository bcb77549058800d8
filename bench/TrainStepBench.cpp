//===- TrainStepBench.cpp - whole training steps, model against model -----===//
//
// switchyard-bench --train-step A.mlir,B.mlir,...: compiles each model with
// its AdamW step (the same compilation as `switchyard train`) and times the
// steps of runtime::train itself (the product's training loop, the state
// resident on the backend) on a synthetic token stream, so that models
// compare on the same footing: the paper's claim is a SwitchHead step
// against its parameter-matched dense baseline's. --compile-only reports
// the compile times alone (for the GPU, that needs no GPU). With --python,
// each model is also trained by its PyTorch peer (bench/torch_train_step.py:
// the same layers from the same initial parameters, the same optimizer and
// schedule), after checking that both compute the same loss.
//
//===----------------------------------------------------------------------===//

#include "bench/Bench.h"
#include "dialect/Lm/IR/LmOps.h"
#include "lib/InitSwitchyard.h"
#include "runtime/Training.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <random>

using namespace switchyard;
using namespace switchyard::bench;
using llvm::formatv;

namespace {

struct StepRow {
  std::string model, fuse;
  int64_t params = 0, tokensPerStep = 0;
  double compileMs = NAN, cachedMs = NAN, stepMs = NAN, firstLoss = NAN,
         lastLoss = NAN;
  /// The PyTorch peer's rows: `model` names the formulation and threads;
  /// `base` is the Switchyard row of the same model.
  bool peer = false;
  size_t base = 0;
};

/// The time to load the program from the compile cache: it is compiled
/// into a fresh cache directory, then compiled again from there.
double measureCachedCompile(const Options &options, llvm::StringRef source,
                            llvm::StringRef path,
                            rt::CompileOptions compileOpts) {
  llvm::SmallString<128> directory;
  if (std::error_code error = llvm::sys::fs::createUniqueDirectory(
          "switchyard-bench-cache", directory))
    fail("compile cache directory: " + error.message());
  compileOpts.cacheDirectory = std::string(directory);
  double storeMs = NAN, loadMs = NAN;
  (void)compile(options, source, path, compileOpts, storeMs);
  (void)compile(options, source, path, compileOpts, loadMs);
  (void)llvm::sys::fs::remove_directories(directory);
  return loadMs;
}

/// Uniform random token ids in [0, vocab): enough training text for every
/// step's batch (contiguous XL streams included) and validation text for
/// the one evaluation runtime::train ends with.
rt::TokenCorpus syntheticCorpus(int64_t vocab, int64_t batch, int64_t time,
                                int64_t steps) {
  rt::TokenCorpus corpus;
  corpus.vocab = vocab;
  corpus.source = "synthetic (uniform random ids)";
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  corpus.train.resize(size_t(batch * (time * (steps + 2) + 1)));
  corpus.valid.resize(size_t(batch * (time + 1) * 2));
  for (int32_t &t : corpus.train)
    t = id(rng);
  for (int32_t &t : corpus.valid)
    t = id(rng);
  return corpus;
}

/// The layers of the first lm.model in `source`, in program order, as
/// bench/torch_train_step.py reads them: {"op", "name", the op's attributes,
/// "memory": the XL memory's length}. The peer builds a chain, so every
/// layer must take the previous one's result.
llvm::json::Array describeLayers(llvm::StringRef source, llvm::StringRef path) {
  mlir::DialectRegistry registry;
  mlir::switchyard::registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &context, path);
  if (!module)
    fail(path + ": cannot parse the model for the PyTorch peer");
  auto models = module->getOps<mlir::lm::ModelOp>();
  if (models.empty())
    fail(path + ": no lm.model");
  llvm::json::Array layers;
  mlir::Value previous;
  for (mlir::Operation &op : (*models.begin()).getBody().front()) {
    if (mlir::isa<mlir::lm::ReturnOp>(op))
      break;
    if (op.getNumResults() != 1 || op.getNumOperands() == 0 ||
        (previous && op.getOperand(0) != previous))
      fail(path + ": the PyTorch peer takes models whose layers form a "
                  "chain; " + op.getName().getStringRef() + " does not");
    previous = op.getResult(0);
    llvm::json::Object layer{
        {"op", op.getName().stripDialect().str()}};
    for (mlir::NamedAttribute attr : op.getAttrs()) {
      llvm::StringRef key = attr.getName().getValue();
      if (key == "layer_name")
        layer["name"] = mlir::cast<mlir::StringAttr>(attr.getValue()).str();
      else if (auto i = mlir::dyn_cast<mlir::IntegerAttr>(attr.getValue()))
        layer[key] = i.getInt();
      else if (auto f = mlir::dyn_cast<mlir::FloatAttr>(attr.getValue()))
        layer[key] = f.getValueAsDouble();
      else if (auto pos = mlir::dyn_cast<mlir::lm::PosEncodingAttr>(
                   attr.getValue()))
        layer[key] = mlir::lm::stringifyPosEncoding(pos.getValue()).str();
    }
    mlir::Value memory;
    if (auto sh = mlir::dyn_cast<mlir::lm::SwitchHeadOp>(op))
      memory = sh.getMemory();
    else if (auto mha = mlir::dyn_cast<mlir::lm::MhaOp>(op))
      memory = mha.getMemory();
    layer["memory"] =
        memory ? mlir::cast<mlir::ShapedType>(memory.getType()).getDimSize(1)
               : int64_t(0);
    layers.push_back(std::move(layer));
  }
  return layers;
}

/// The inputs of the cross-check: the parameters (initialised with seed 1)
/// and one batch of tokens and targets.
struct PeerInputs {
  std::vector<rt::HostTensor> params;
  rt::HostTensor tokens, targets;
};

PeerInputs makePeerInputs(const rt::Program &program, int64_t batch,
                          int64_t time, int64_t vocab) {
  PeerInputs in;
  in.params = initialParams(program, /*seed=*/1);
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  std::vector<int32_t> window(size_t(batch * (time + 1)));
  for (int32_t &t : window)
    t = id(rng);
  std::vector<int32_t> tokens, targets;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < time; ++t) {
      tokens.push_back(window[size_t(b * (time + 1) + t)]);
      targets.push_back(window[size_t(b * (time + 1) + t + 1)]);
    }
  in.tokens = rt::HostTensor::fromValues<int32_t>(
      "tokens", rt::ElementType::i32, {batch, time}, tokens);
  in.targets = rt::HostTensor::fromValues<int32_t>(
      "targets", rt::ElementType::i32, {batch, time}, targets);
  return in;
}

/// The mean cross-entropy (the C++ reference's) of the compiled forward
/// function `model`'s logits on the peer inputs, memories zero (inference:
/// no dropout).
double switchyardCheckLoss(const Options &options, rt::Program &program,
                           const rt::FunctionSpec &model,
                           const PeerInputs &in) {
  std::vector<rt::HostTensor> zeros;
  zeros.reserve(model.arguments.size());
  std::vector<const rt::HostTensor *> arguments;
  for (const rt::TensorSpec &spec : model.arguments) {
    if (spec.role == rt::ArgRole::param) {
      auto p = llvm::find_if(in.params, [&](const rt::HostTensor &t) {
        return t.name == spec.param;
      });
      if (p == in.params.end())
        fail("no initial value for parameter " + spec.param);
      arguments.push_back(&*p);
    } else if (spec.vocab) {
      arguments.push_back(&in.tokens);
    } else {
      std::vector<int64_t> shape = spec.shape;
      shape[0] = in.tokens.shape[0];
      int64_t count = 1;
      for (int64_t size : shape)
        count *= size;
      zeros.push_back(rt::HostTensor::fromValues<float>(
          "memory", rt::ElementType::f32, shape,
          std::vector<float>(size_t(count), 0.0f)));
      arguments.push_back(&zeros.back());
    }
  }
  std::vector<rt::HostTensor> results;
  (void)timeCall(options, program, model.name, arguments, results);
  ref::IndexTensor targets{in.targets.shape, {}};
  for (int32_t t : in.targets.values<int32_t>())
    targets.data.push_back(t);
  return ref::crossEntropy(toReference(results.front()), targets);
}

/// Writes the peer's inputs and config.json into `dir`.
void exportPeerInputs(const Options &options, llvm::StringRef dir,
                      llvm::json::Array layers, const PeerInputs &in,
                      const rt::TrainConfig &config, int64_t time) {
  llvm::json::Array names;
  for (const rt::HostTensor &p : in.params) {
    names.push_back(p.name);
    writeNpyInto(dir, p);
  }
  for (const rt::HostTensor *t : {&in.tokens, &in.targets})
    writeNpyInto(dir, *t);
  writeJson(
      (dir + "/config.json").str(),
      llvm::json::Object{
          {"layers", std::move(layers)},
          {"params", std::move(names)},
          {"batch", options.batch},
          {"time", time},
          {"reps", int64_t(options.reps)},
          {"threads", 1},
          {"train", llvm::json::Object{{"lr", config.lr},
                                       {"beta1", config.beta1},
                                       {"beta2", config.beta2},
                                       {"eps", config.eps},
                                       {"weight_decay", config.weightDecay},
                                       {"clip", config.clip},
                                       {"warmup", config.warmup},
                                       {"steps", config.steps}}}});
}

/// The PyTorch peer's rows for one model (bench/torch_train_step.py, per
/// thread count), after checking that its inference loss on the check batch
/// equals the compiled forward function's and that it has as many
/// parameters.
std::vector<StepRow> measureTorchSteps(const Options &options,
                                       llvm::StringRef source,
                                       llvm::StringRef path,
                                       rt::Program &program,
                                       const rt::FunctionSpec &model,
                                       const rt::TrainConfig &config,
                                       int64_t time, const StepRow &ours) {
  PeerInputs in = makePeerInputs(program, options.batch, time,
                                 *model.arguments[0].vocab);
  double loss = switchyardCheckLoss(options, program, model, in);
  llvm::SmallString<128> dir = peerDirectory();
  exportPeerInputs(options, dir, describeLayers(source, path), in, config,
                   time);
  std::vector<unsigned> threads = torchThreadCounts(options);
  std::vector<StepRow> rows;
  for (unsigned n : threads) {
    std::vector<std::string> args = {std::string(dir), std::to_string(n)};
    llvm::append_range(args, torchDeviceArguments(options));
    llvm::json::Object report = runPython(options, options.stepScript, args);
    double peerLoss = report.getNumber("check_loss").value_or(NAN);
    int64_t peerParams = report.getInteger("params").value_or(-1);
    if (!(std::abs(peerLoss - loss) <= lossTolerance(options) * std::abs(loss)) ||
        peerParams != ours.params)
      fail(formatv("{0}: the PyTorch peer computes another model: loss "
                   "{1:F6} (Switchyard {2:F6}), {3} parameters (Switchyard "
                   "{4})",
                   path, peerLoss, loss, peerParams, ours.params));
    if (n == threads.front())
      llvm::errs() << formatv("{0}: PyTorch {1} checked: inference loss "
                              "{2:F6} (Switchyard {3:F6}), {4} parameters\n",
                              ours.model,
                              report.getString("torch").value_or("?"), peerLoss,
                              loss, peerParams);
    if (const llvm::json::Object *results = report.getObject("results"))
      for (const auto &[form, value] : *results) {
        const llvm::json::Object *r = value.getAsObject();
        StepRow row;
        row.peer = true;
        row.model = "  PyTorch " + form.str();
        row.fuse = options.gpu()
                       ? report.getString("dtype").value_or("?").str()
                       : formatv("{0} thread{1}", n, n == 1 ? "" : "s").str();
        row.params = peerParams;
        row.tokensPerStep = ours.tokensPerStep;
        row.stepMs = r->getNumber("step_ms").value_or(NAN);
        row.firstLoss = r->getNumber("first_loss").value_or(NAN);
        row.lastLoss = r->getNumber("last_loss").value_or(NAN);
        rows.push_back(std::move(row));
      }
  }
  llvm::sys::fs::remove_directories(dir);
  return rows;
}

/// Appends the model's row, and its PyTorch peer's rows where there is a
/// peer, to `rows`.
void measureModel(const Options &options, llvm::StringRef path,
                  llvm::StringRef fuse, std::vector<StepRow> &rows) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> source =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!source)
    fail("cannot read " + path + ": " + source.getError().message());
  StepRow row;
  row.model = llvm::sys::path::filename(path).str();
  row.fuse = fuse.str();
  rt::CompileOptions compileOpts = compileOptions(options, fuse);
  compileOpts.trainStep = true;
  std::unique_ptr<rt::Program> program = compile(
      options, (*source)->getBuffer(), path, compileOpts, row.compileMs);
  row.params = program->params().totalElements();
  if (options.compileOnly) {
    row.cachedMs = measureCachedCompile(options, (*source)->getBuffer(), path,
                                        compileOpts);
    rows.push_back(std::move(row));
    return;
  }

  // The model's context and vocabulary, from its token argument.
  const rt::FunctionSpec *model = nullptr;
  for (const rt::FunctionSpec &f : program->functions())
    if (program->lookup(f.name + "_train_step"))
      model = &f;
  if (!model || model->arguments.empty() ||
      model->arguments[0].shape.size() != 2 || !model->arguments[0].vocab)
    fail(path + ": no model with token ids [batch, time] and a train step");
  int64_t time = model->arguments[0].shape[1];
  rt::TokenCorpus corpus =
      syntheticCorpus(*model->arguments[0].vocab, options.batch, time,
                      int64_t(options.reps) + 1);
  rt::TrainConfig config;
  config.steps = int64_t(options.reps) + 1;
  config.batch = options.batch;
  config.evalEvery = 0;
  config.evalBatches = 1;
  std::vector<double> seconds;
  std::vector<double> losses;
  rt::TrainSummary summary = check(
      rt::train(
          *program, corpus, config,
          [&](const rt::StepRecord &step) {
            seconds.push_back(step.seconds);
            losses.push_back(step.loss);
          },
          [](const rt::EvalRecord &) {}),
      "train " + path);
  row.tokensPerStep = summary.tokensPerStep;
  // The first step is the warm-up (first calls, the driver's pool filling).
  std::vector<double> timed(seconds.begin() + 1, seconds.end());
  std::sort(timed.begin(), timed.end());
  row.stepMs = 1e3 * timed[timed.size() / 2];
  row.firstLoss = losses.front();
  row.lastLoss = losses.back();
  rows.push_back(row);
  if (options.python.empty())
    return;
  size_t base = rows.size() - 1;
  for (StepRow &peer :
       measureTorchSteps(options, (*source)->getBuffer(), path, *program,
                         *model, config, time, row)) {
    peer.base = base;
    rows.push_back(std::move(peer));
  }
}

} // namespace

int bench::runTrainSteps(const Options &options,
                         llvm::ArrayRef<std::string> models) {
  if (options.compileOnly)
    llvm::outs() << formatv("Training steps (AdamW), compile only\n{0}\n\n",
                            describeBackend(options));
  else
    llvm::outs() << formatv(
        "Training steps (AdamW, runtime::train on a synthetic token stream), "
        "batch {0}; the median of {1} steps after one warm-up step\n{2}\n\n",
        options.batch, options.reps, describeBackend(options));
  llvm::outs() << formatv("{0,-28} {1,-46} {2,9} {3,11} {4,10} {5,10} {6,10} "
                          "{7,8} {8}\n",
                          "model", "kernels", "params", "compile ms",
                          "cached ms", "step ms", "tokens/s", "ratio",
                          "loss first > last");
  llvm::outs().flush();
  std::vector<StepRow> rows;
  for (const std::string &fuse : options.fusions)
    for (const std::string &model : models) {
      size_t begin = rows.size();
      measureModel(options, model, fuse, rows);
      for (const StepRow &row : llvm::drop_begin(rows, begin)) {
        // A model against the first model; a peer against its model.
        std::string label = row.peer ? row.fuse : fusionLabel(options, row.fuse);
        std::string versus = row.peer ? ratio(row.stepMs, rows[row.base].stepMs)
                                      : ratio(row.stepMs, rows.front().stepMs);
        llvm::outs() << formatv(
            "{0,-28} {1,-46} {2,8:F2}M {3,11:F0} {4,10:F0} {5,10:F1} "
            "{6,10:F0} {7,8} {8:F3} > {9:F3}\n",
            row.model, label, double(row.params) / 1e6, row.compileMs,
            row.cachedMs, row.stepMs,
            double(row.tokensPerStep) / (row.stepMs / 1e3), versus,
            row.firstLoss, row.lastLoss);
      }
      llvm::outs().flush();
    }
  llvm::outs() << formatv(
      "\nratio: a model's step time over the first row's (above 1, the first "
      "row's model trains\nfaster); a PyTorch row's step time over its "
      "model's Switchyard row's (above 1,\nSwitchyard is faster). PyTorch "
      "(bench/torch_train_step.py): the same layers, initial\nparameters, "
      "optimizer and schedule, checked against the compiled forward "
      "function's\nloss; dense/loop: its SwitchHead expert projections. "
      "compile ms: definition to callable\ncode (forward, _grad and "
      "_train_step), without the compile cache; cached ms\n(--compile-only): "
      "the same from the compile cache.\n");
  if (!options.jsonOut.empty()) {
    llvm::json::Array entries;
    for (const StepRow &row : rows)
      entries.push_back(llvm::json::Object{
          {"model", llvm::StringRef(row.model).trim().str()},
          {"peer", row.peer},
          {"fuse", row.fuse},
          {"params", row.params},
          {"compile_ms", number(row.compileMs)},
          {"cached_compile_ms", number(row.cachedMs)},
          {"step_ms", number(row.stepMs)},
          {"tokens_per_step", row.tokensPerStep}});
    writeJson(options.jsonOut,
              llvm::json::Object{{"backend", describeBackend(options)},
                                 {"batch", options.batch},
                                 {"rows", std::move(entries)}});
  }
  return 0;
}

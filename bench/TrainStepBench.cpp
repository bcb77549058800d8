//===- TrainStepBench.cpp - whole training steps, model against model -----===//
//
// switchyard-bench --train-step A.mlir,B.mlir,...: compiles each model with
// its AdamW step (the same compilation as `switchyard train`) and times the
// steps of runtime::train itself (the product's training loop, the state
// resident on the backend) on a synthetic token stream, so that models
// compare on the same footing: the paper's claim is a SwitchHead step
// against its parameter-matched dense baseline's. --compile-only reports
// the compile times alone (for the GPU, that needs no GPU).
//
//===----------------------------------------------------------------------===//

#include "bench/Bench.h"
#include "runtime/Training.h"

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

StepRow measureModel(const Options &options, llvm::StringRef path,
                     llvm::StringRef fuse) {
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
    return row;
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
  return row;
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
  llvm::outs() << formatv("{0,-28} {1,-26} {2,9} {3,11} {4,10} {5,10} {6,10} "
                          "{7,8} {8}\n",
                          "model", "kernels", "params", "compile ms",
                          "cached ms", "step ms", "tokens/s", "ratio",
                          "loss first > last");
  llvm::outs().flush();
  std::vector<StepRow> rows;
  for (const std::string &fuse : options.fusions)
    for (const std::string &model : models) {
      rows.push_back(measureModel(options, model, fuse));
      const StepRow &row = rows.back();
      const StepRow &first = rows.front();
      llvm::outs() << formatv(
          "{0,-28} {1,-26} {2,8:F2}M {3,11:F0} {4,10:F0} {5,10:F1} {6,10:F0} "
          "{7,8} {8:F3} > {9:F3}\n",
          row.model, fusionLabel(options, row.fuse),
          double(row.params) / 1e6, row.compileMs, row.cachedMs, row.stepMs,
          double(row.tokensPerStep) / (row.stepMs / 1e3),
          ratio(row.stepMs, first.stepMs), row.firstLoss, row.lastLoss);
      llvm::outs().flush();
    }
  llvm::outs() << formatv(
      "\nratio: the row's step time over the first row's; above 1, the first "
      "row's model trains\nfaster. compile ms: definition to callable code "
      "(forward, _grad and _train_step), without\nthe compile cache; cached "
      "ms (--compile-only): the same from the compile cache.\n");
  if (!options.jsonOut.empty()) {
    llvm::json::Array entries;
    for (const StepRow &row : rows)
      entries.push_back(llvm::json::Object{
          {"model", row.model},
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

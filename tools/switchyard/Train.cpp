//===- Train.cpp - switchyard train ---------------------------------------===//
//
// `switchyard train MODEL.mlir`: compiles a model with its gradients and
// AdamW step for the CPU, the GPU or the GPU emulation and trains it on a
// text corpus (bytes or SentencePiece subwords), with progress and
// validation on stderr, checkpoints that resume a run exactly, and
// optionally a JSON summary and an SVG loss curve.
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/Commands.h"
#include "tools/switchyard/Common.h"

#include "runtime/Nccl.h"
#include "runtime/TensorFile.h"
#include "runtime/Training.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace switchyard::driver {
namespace {

std::string formatDuration(double seconds) {
  int64_t s = int64_t(seconds + 0.5);
  if (s >= 3600)
    return llvm::formatv("{0}h{1:2}m", s / 3600, (s / 60) % 60).str();
  if (s >= 60)
    return llvm::formatv("{0}m{1:2}s", s / 60, s % 60).str();
  return llvm::formatv("{0}s", s).str();
}

/// A loss curve as SVG: training loss per step and validation points, in
/// bits per byte.
std::string lossCurveSvg(const rt::TrainSummary &summary, double unigram,
                         double bytesPerToken) {
  const double width = 640, height = 400, left = 60, bottom = 40, top = 20,
               right = 20;
  double maxY = unigram;
  auto bits = [&](double nats) {
    return nats / std::numbers::ln2 / bytesPerToken;
  };
  for (const rt::StepRecord &s : summary.steps)
    maxY = std::max(maxY, bits(s.loss));
  maxY = std::ceil(maxY);
  double maxX = summary.steps.empty() ? 1 : double(summary.steps.back().step);
  auto x = [&](double step) {
    return left + (width - left - right) * step / maxX;
  };
  auto y = [&](double bits) {
    return height - bottom - (height - top - bottom) * bits / maxY;
  };
  std::string svg = llvm::formatv(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"14\">{3}: loss in bits per byte</text>\n",
      width, height, left, summary.model);
  for (int tick = 0; tick <= int(maxY); ++tick)
    svg += llvm::formatv("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" "
                         "stroke=\"#ddd\"/><text x=\"{3}\" y=\"{4}\">{5}</text>\n",
                         left, width - right, y(tick), left - 25, y(tick) + 4,
                         tick);
  svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\">step</text>\n",
                       width / 2, height - 8);
  svg += llvm::formatv("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" "
                       "stroke=\"#999\" stroke-dasharray=\"4\"/><text x=\"{3}\" "
                       "y=\"{4}\" fill=\"#666\">unigram entropy</text>\n",
                       left, width - right, y(unigram), width - right - 110,
                       y(unigram) - 4);
  std::string points;
  for (const rt::StepRecord &s : summary.steps)
    points += llvm::formatv("{0:f1},{1:f1} ", x(double(s.step)),
                            y(bits(s.loss)))
                  .str();
  svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" points=\"" + points +
         "\"/>\n";
  for (const rt::EvalRecord &e : summary.evals)
    svg += llvm::formatv("<circle cx=\"{0:f1}\" cy=\"{1:f1}\" r=\"4\" "
                         "fill=\"#d62728\"/>\n",
                         x(double(e.step)), y(e.bitsPerByte));
  svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\" fill=\"#1f77b4\">train</text>"
                       "<text x=\"{0}\" y=\"{2}\" fill=\"#d62728\">validation"
                       "</text>\n</svg>\n",
                       width - right - 80, top + 20, top + 36);
  return svg;
}

} // namespace

int runTrain(int argc, char **argv) {
  static ModelOptions model;
  static CorpusOptions corpus(model.category);
  static cl::opt<int64_t> steps("steps", cl::desc("Optimizer steps (300)"),
                                cl::init(300), cl::cat(model.category));
  static cl::opt<int64_t> batch("batch", cl::desc("Sequences per step (8)"),
                                cl::init(8), cl::cat(model.category));
  static cl::opt<double> lr("lr", cl::desc("Peak learning rate (2e-3)"),
                            cl::init(2e-3), cl::cat(model.category));
  static cl::opt<int64_t> warmup(
      "warmup", cl::desc("Linear warm-up steps before the cosine decay (30)"),
      cl::init(30), cl::cat(model.category));
  static cl::opt<double> clip(
      "clip", cl::desc("Clip gradients to this global norm; 0: off (0.25)"),
      cl::init(0.25), cl::cat(model.category));
  static cl::opt<double> weightDecay(
      "weight-decay", cl::desc("AdamW weight decay on matrices (0)"),
      cl::init(0.0), cl::cat(model.category));
  static cl::opt<uint64_t> seed(
      "seed", cl::desc("Seed of the initialisation and the batches (0)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<int64_t> evalEvery(
      "eval-every", cl::desc("Validate every N steps; 0: at the end only (100)"),
      cl::init(100), cl::cat(model.category));
  static cl::opt<int64_t> evalBatches(
      "eval-batches", cl::desc("Validation batches per evaluation (4)"),
      cl::init(4), cl::cat(model.category));
  static cl::opt<std::string> checkpoint(
      "checkpoint",
      cl::desc("Write parameters and optimizer state here (safetensors, "
               "atomically) at the end and every --checkpoint-every steps"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static cl::opt<int64_t> checkpointEvery(
      "checkpoint-every", cl::desc("Checkpoint period in steps (0: end only)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<std::string> resume(
      "resume", cl::desc("Continue from this checkpoint, exactly"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static cl::list<std::string> initFrom(
      "init-from",
      cl::desc("Start from the parameters in this safetensors file (by "
               "Switchyard's or the official names; repeatable) with fresh "
               "optimizer state, e.g. to fine-tune official weights"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static ParamFileFlags paramFlags(model.category);
  static cl::opt<int64_t> stopAfter(
      "interrupt-after",
      cl::desc("End after this step, as if interrupted (the schedule still "
               "runs to --steps; a checkpoint is written)"),
      cl::init(0), cl::cat(model.category));
  static cl::opt<std::string> allReduce(
      "allreduce",
      cl::desc("How data-parallel ranks average their gradients: mpi (in "
               "host memory, through Open MPI), nccl (in device memory, "
               "through NCCL: libnccl.so.2 or $SWITCHYARD_NCCL_LIBRARY; "
               "--device gpu), auto (the default: nccl on the GPU, else "
               "mpi). nccl without mpirun runs one rank through it, to "
               "measure its share of a step"),
      cl::init("auto"), cl::cat(model.category));
  static cl::opt<std::string> summaryPath(
      "summary", cl::desc("Write a JSON summary of the run here"),
      cl::value_desc("file.json"), cl::cat(model.category));
  static cl::opt<std::string> curvePath(
      "curve", cl::desc("Draw the loss curve here (SVG)"),
      cl::value_desc("file.svg"), cl::cat(model.category));
  static DeviceOption device(model.category);
  registerCommandOptions(model.category, {&device.gpuCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard train: train a language model on text, on the CPU or GPU\n\n"
      "Compiles MODEL.mlir with its gradients and AdamW step\n"
      "(--switchyard-cpu-pipeline=train-step=1; with --device gpu, the GPU\n"
      "pipeline), then trains it on a byte-level corpus (default: Debian's\n"
      "fortunes) with a linear warm-up and\n"
      "cosine decay, gradient clipping and validation in bits per byte;\n"
      "--tokenizer sentencepiece trains (or loads) a subword vocabulary\n"
      "instead.\n"
      "Batches and dropout masks depend only on the seed and the step, and\n"
      "checkpoints hold the optimizer state (and XL memories), so --resume\n"
      "continues a run exactly.\n"
      "Regularisation is part of the model definition: 'dropout' (residual),\n"
      "'expert_dropout' and the sigma-MoE 'entropy_reg' on each block.\n"
      "Transformer-XL models read the text as --batch contiguous streams and\n"
      "carry their memories from step to step.\n"
      "Under mpirun -np N (Open MPI), N processes train together: each takes\n"
      "1/N of every batch (--batch is the global batch, a multiple of N) and\n"
      "the gradients are averaged before clipping and AdamW; rank 0 reports\n"
      "and writes the checkpoint, which resumes on any number of ranks.\n"
      "With --device gpu the ranks average in device memory through NCCL\n"
      "(--allreduce).\n");

  // Under an MPI launcher (mpirun -np N), the ranks train together; rank 0
  // reports and writes the outputs. An error on any rank ends them all.
  rt::Communicator *comm = nullptr;
  if (rt::launchedByMpi()) {
    llvm::Expected<rt::Communicator *> world = rt::mpiWorld();
    if (!world)
      return fail(world.takeError());
    comm = *world;
  }
  int ranks = comm ? comm->size() : 1;
  bool reporter = !comm || comm->rank() == 0;
  auto fail = [&](auto &&error) {
    int code = driver::fail(std::forward<decltype(error)>(error));
    if (ranks > 1)
      comm->abort(code);
    return code;
  };

  // Every setting and output path is checked before the corpus is read
  // and the model compiled, so that a bad value costs no time.
  rt::TrainConfig config;
  config.steps = steps;
  config.batch = batch;
  config.lr = lr;
  config.warmup = warmup;
  config.clip = clip;
  config.weightDecay = weightDecay;
  config.seed = seed;
  config.evalEvery = evalEvery;
  config.evalBatches = evalBatches;
  config.checkpoint = checkpoint;
  config.checkpointEvery = checkpointEvery;
  config.resume = resume;
  config.initFrom.assign(initFrom.begin(), initFrom.end());
  llvm::Expected<rt::ParamFileOptions> fileOptions = paramFlags.options(seed);
  if (!fileOptions)
    return fail(fileOptions.takeError());
  config.initOptions = std::move(*fileOptions);
  config.stopAfter = stopAfter;
  config.communicator = ranks > 1 ? comm : nullptr;
  if (allReduce != "auto" && allReduce != "mpi" && allReduce != "nccl")
    return fail("--allreduce: expected auto, mpi or nccl, found '" + allReduce +
                "'");
  bool nccl = allReduce == "nccl" || (allReduce == "auto" && ranks > 1 &&
                                      device.device == Device::gpu);
  if (nccl && device.device != Device::gpu)
    return fail(
        "--allreduce nccl needs --device gpu (NCCL averages device memory)");
  if (llvm::Error error = rt::validate(config))
    return fail(std::move(error));
  if (llvm::Error error = model.check())
    return fail(std::move(error));
  if (llvm::Error error = corpus.check())
    return fail(std::move(error));
  for (const std::string *path : {&checkpoint.getValue(),
                                  &summaryPath.getValue(),
                                  &curvePath.getValue()})
    if (!path->empty())
      if (llvm::Error error = rt::checkWritable(*path))
        return fail(std::move(error));

  llvm::Expected<rt::TokenCorpus> text = corpus.load();
  if (!text)
    return fail(text.takeError());
  CompileRequest request;
  request.trainStep = true;
  request.optimizerStep = ranks > 1 || nccl;
  llvm::Expected<std::unique_ptr<rt::Program>> compiled =
      compileFor(device, model, request);
  if (!compiled)
    return fail(compiled.takeError());
  // Once the GPU is open: NCCL on every rank's device.
  std::unique_ptr<rt::NcclGroup> group;
  if (nccl) {
    llvm::Expected<std::unique_ptr<rt::NcclGroup>> created =
        rt::NcclGroup::create(ranks > 1 ? comm : nullptr);
    if (!created)
      return fail(created.takeError());
    group = std::move(*created);
    config.nccl = group.get();
  }
  double unigram = text->unigramEntropyBits();
  if (reporter)
    llvm::errs() << llvm::formatv(
        "corpus: {0}: {1} training and {2} validation tokens, unigram "
        "entropy {3:f3} bits/byte\n",
        text->source, text->train.size(), text->valid.size(), unigram);
  if (reporter && (ranks > 1 || group))
    llvm::errs() << llvm::formatv(
        "data parallel: {0}; global batch {1}, {2} sequences per rank; "
        "gradients averaged {3}\n",
        ranks > 1 ? comm->describe() : "1 rank", int64_t(batch),
        int64_t(batch) / ranks,
        group ? "in device memory by " + group->describe()
              : std::string("in host memory by MPI"));

  bool terminal = llvm::errs().is_displayed();
  double elapsed = 0;
  int64_t done = 0;
  auto onStep = [&](const rt::StepRecord &record) {
    if (!reporter)
      return;
    elapsed += record.seconds;
    ++done;
    double perStep = elapsed / double(done);
    double eta = perStep * double(steps - record.step);
    std::string line = llvm::formatv(
        "step {0}/{1}  loss {2:f4}  lr {3:e2}  |g| {4:f3}  {5:f0} tok/s  "
        "ETA {6}",
        record.step, int64_t(steps), record.loss, record.lr, record.gradNorm,
        double(batch) * double((*compiled)->functions().front().arguments
                                   .front().shape[1]) /
            record.seconds,
        formatDuration(eta));
    if (terminal)
      llvm::errs() << "\r" << line << "\x1b[K";
    else if (record.step == 1 || record.step % std::max<int64_t>(1, steps / 20) == 0 ||
             record.step == steps)
      llvm::errs() << line << "\n";
  };
  auto onEval = [&](const rt::EvalRecord &record) {
    if (!reporter)
      return;
    llvm::errs() << (terminal ? "\n" : "")
                 << llvm::formatv("validation at step {0}: {1:f4} nats, "
                                  "{2:f4} bits/byte\n",
                                  record.step, record.loss,
                                  record.bitsPerByte);
  };
  llvm::Expected<rt::TrainSummary> summary =
      rt::train(**compiled, *text, config, onStep, onEval);
  if (!summary)
    return fail(summary.takeError());

  if (!reporter)
    return 0;
  const rt::EvalRecord &final = summary->evals.back();
  llvm::outs() << llvm::formatv(
      "trained {0} to step {1} ({2} tokens this run) in {3}; validation "
      "{4:f4} bits/byte (unigram entropy of the corpus {5:f4})\n",
      summary->model, final.step,
      int64_t(summary->steps.size()) * summary->tokensPerStep,
      formatDuration(summary->seconds), final.bitsPerByte, unigram);
  if (ranks > 1 || group) {
    // The averaging's share of the steps (the first, which compiles the
    // collective's plans, too).
    double averaging = 0, stepping = 0;
    for (const rt::StepRecord &s : summary->steps) {
      averaging += s.averagingSeconds;
      stepping += s.seconds;
    }
    llvm::errs() << llvm::formatv(
        "averaging the gradients: {0:f2} ms per step, {1:f1}% of the step "
        "time\n",
        1e3 * averaging / double(std::max<size_t>(1, summary->steps.size())),
        stepping > 0 ? 100 * averaging / stepping : 0.0);
  }

  if (!summaryPath.empty()) {
    llvm::json::Array stepsJson, evalsJson;
    for (const rt::StepRecord &s : summary->steps)
      stepsJson.push_back(
          llvm::json::Object{{"step", s.step},
                             {"loss", s.loss},
                             {"lr", s.lr},
                             {"grad_norm", s.gradNorm},
                             {"seconds", s.seconds},
                             {"averaging_seconds", s.averagingSeconds}});
    for (const rt::EvalRecord &e : summary->evals)
      evalsJson.push_back(llvm::json::Object{{"step", e.step},
                                             {"loss", e.loss},
                                             {"bits_per_byte", e.bitsPerByte}});
    llvm::json::Object root{
        {"model", summary->model},
        {"model_file", std::string(model.input)},
        {"corpus", text->source},
        {"unigram_entropy_bits_per_byte", unigram},
        {"steps", int64_t(steps)},
        {"batch", int64_t(batch)},
        {"ranks", int64_t(ranks)},
        {"tokens_per_step", summary->tokensPerStep},
        {"lr", double(lr)},
        {"seed", int64_t(seed)},
        {"seconds", summary->seconds},
        {"final_validation_bits_per_byte", final.bitsPerByte},
        {"train", std::move(stepsJson)},
        {"validation", std::move(evalsJson)}};
    if (llvm::Error error = rt::writeTextFile(
            summaryPath,
            llvm::formatv("{0:2}\n", llvm::json::Value(std::move(root))).str()))
      return fail(std::move(error));
  }
  if (!curvePath.empty())
    if (llvm::Error error =
            rt::writeTextFile(curvePath, lossCurveSvg(*summary, unigram,
                                              text->trainBytesPerToken)))
      return fail(std::move(error));
  return 0;
}

} // namespace switchyard::driver

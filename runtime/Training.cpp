//===- Training.cpp - training and evaluation loops -----------------------===//
//
// Implements the training loop around the compiled train step: the model a
// program trains, the state kept on the program's backend between steps,
// the batches of each step, the learning-rate schedule, the periodic
// validation and checkpoints, and the summary of the run; also evaluation
// and the loading of parameters to evaluate. Corpora, checkpoints and
// tokenizers have their own files (Corpus.cpp, Checkpoint.cpp,
// Tokenizer.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/Training.h"
#include "runtime/Nccl.h"
#include "runtime/ParamFiles.h"
#include "runtime/TrainingInternal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <numbers>

using namespace switchyard::runtime;
using namespace switchyard::runtime::training;
using llvm::Expected;

namespace {

/// The model a program trains or evaluates.
struct ModelInfo {
  const FunctionSpec *forward = nullptr;
  /// Window length T.
  int64_t time = 0;
  /// Transformer-XL memories: arguments after the tokens, fed from as many
  /// results after the logits.
  size_t memories = 0;
};

/// The model a program trains: the function with a `_train_step` sibling
/// (or, for evaluation, with parameters and logits; not a decoding step),
/// taking token ids, XL memories and parameters.
Expected<ModelInfo> modelOf(Program &program, bool training,
                            int64_t corpusVocab) {
  const FunctionSpec *found = nullptr;
  for (const FunctionSpec &function : program.functions()) {
    llvm::StringRef name = function.name;
    if (name.ends_with("_grad") || name.ends_with("_train_step") ||
        name.ends_with("_optimizer_step") || !function.decoderOf.empty())
      continue;
    bool hasParams = llvm::any_of(function.arguments, [](const TensorSpec &a) {
      return a.role == ArgRole::param;
    });
    if (!hasParams ||
        (training && !program.lookup(function.name + "_train_step")))
      continue;
    if (found)
      return failure("the module has several models (@" + found->name + ", @" +
                     function.name + "); train one at a time");
    found = &function;
  }
  if (!found)
    return failure(training ? "no model with a train step in the module"
                            : "no model in the module");
  const TensorSpec &tokens = found->arguments.front();
  if (!tokens.vocab || tokens.shape.size() != 2 || tokens.shape[1] < 1)
    return failure("@" + found->name +
                   ": expected token ids [batch, time] as the first argument");
  if (*tokens.vocab < corpusVocab)
    return failure(llvm::formatv("@{0}: the corpus has {1} token ids, but the "
                                 "model's vocabulary is {2}",
                                 found->name, corpusVocab, *tokens.vocab));
  ModelInfo info;
  info.forward = found;
  info.time = tokens.shape[1];
  for (size_t a = 1; a < found->arguments.size(); ++a) {
    const TensorSpec &memory = found->arguments[a];
    if (memory.role != ArgRole::data)
      continue;
    size_t result = 1 + info.memories++;
    if (result >= found->results.size() ||
        found->results[result].shape != memory.shape ||
        found->results[result].type != memory.type)
      return failure(llvm::formatv(
          "@{0}: argument #{1} is a Transformer-XL memory, so result #{2} must "
          "be the next memory, of the same type and shape",
          found->name, a, result));
  }
  return info;
}

/// Tensors that stay on the program's backend between calls (device memory
/// on the GPU): parameters, optimizer moments and XL memories.
using Resident = std::vector<std::unique_ptr<DeviceTensor>>;

/// Copies `tensors` to the program's backend.
Expected<Resident> uploadAll(Program &program,
                             const std::vector<HostTensor> &tensors) {
  Resident resident;
  for (const HostTensor &tensor : tensors) {
    Expected<std::unique_ptr<DeviceTensor>> handle = program.upload(tensor);
    if (!handle)
      return handle.takeError();
    resident.push_back(std::move(*handle));
  }
  return resident;
}

/// Host copies of `tensors` (for checkpoints).
Expected<std::vector<HostTensor>> downloadAll(Program &program,
                                              const Resident &tensors) {
  std::vector<HostTensor> host;
  for (const std::unique_ptr<DeviceTensor> &tensor : tensors) {
    Expected<HostTensor> copy = program.download(*tensor);
    if (!copy)
      return copy.takeError();
    host.push_back(std::move(*copy));
  }
  return host;
}

/// What a call binds to each argument role; training-only roles stay null
/// for the forward function. The per-step inputs are host tensors; the
/// state is resident.
struct Bindings {
  const HostTensor *tokens;
  /// XL memories (the data arguments after the tokens), parameters.
  const Resident *memories, *params;
  const HostTensor *targets = nullptr, *seed = nullptr, *hyper = nullptr;
  const Resident *adamM = nullptr, *adamV = nullptr;
  /// The averaged gradients of a data-parallel step: host tensors (MPI)
  /// or handles (NCCL).
  const std::vector<HostTensor> *gradients = nullptr;
  const Resident *residentGradients = nullptr;
};

/// The arguments of `function` in order, chosen by their roles.
Expected<std::vector<CallArgument>> bind(const FunctionSpec &function,
                                         const Bindings &bindings) {
  std::vector<CallArgument> args;
  size_t memory = 0, param = 0, adamM = 0, adamV = 0, gradient = 0;
  auto next = [](const Resident *list,
                 size_t &index) -> std::optional<CallArgument> {
    if (!list || index >= list->size())
      return std::nullopt;
    return CallArgument((*list)[index++].get());
  };
  auto host = [](const HostTensor *tensor) -> std::optional<CallArgument> {
    if (!tensor)
      return std::nullopt;
    return CallArgument(tensor);
  };
  for (const TensorSpec &spec : function.arguments) {
    std::optional<CallArgument> arg;
    switch (spec.role) {
    case ArgRole::data:
      arg = args.empty() ? host(bindings.tokens)
                         : next(bindings.memories, memory);
      break;
    case ArgRole::param:
      arg = next(bindings.params, param);
      break;
    case ArgRole::targets:
      arg = host(bindings.targets);
      break;
    case ArgRole::seed:
      arg = host(bindings.seed);
      break;
    case ArgRole::adamM:
      arg = next(bindings.adamM, adamM);
      break;
    case ArgRole::adamV:
      arg = next(bindings.adamV, adamV);
      break;
    case ArgRole::hyper:
      arg = host(bindings.hyper);
      break;
    case ArgRole::gradient:
      if (bindings.gradients && gradient < bindings.gradients->size())
        arg = host(&(*bindings.gradients)[gradient++]);
      else
        arg = next(bindings.residentGradients, gradient);
      break;
    }
    if (!arg)
      return failure(llvm::formatv("@{0}: nothing to bind to argument #{1}",
                                   function.name, args.size()));
    args.push_back(*arg);
  }
  return args;
}

/// Zero memories [batch, M, D] for the start of every stream.
std::vector<HostTensor> freshMemories(const ModelInfo &model, int64_t batch) {
  std::vector<HostTensor> memories;
  for (const TensorSpec &spec : model.forward->arguments)
    if (&spec != &model.forward->arguments.front() &&
        spec.role == ArgRole::data) {
      std::vector<int64_t> shape = spec.shape;
      if (shape[0] < 0)
        shape[0] = batch;
      int64_t count = 1;
      for (int64_t size : shape)
        count *= size;
      memories.push_back(HostTensor::fromValues<float>(
          "memory", spec.type, shape, std::vector<float>(size_t(count), 0.f)));
    }
  return memories;
}

/// Mean cross-entropy (nats) of logits [B, T, V] against targets.
double crossEntropy(const HostTensor &logits, const HostTensor &targets) {
  std::span<const float> l = logits.values<float>();
  std::span<const int32_t> y = targets.values<int32_t>();
  int64_t vocab = logits.shape[2];
  double total = 0;
  for (size_t row = 0; row < y.size(); ++row) {
    const float *z = l.data() + row * vocab;
    double top = *std::max_element(z, z + vocab), sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(double(z[v]) - top);
    total += std::log(sum) + top - z[y[row]];
  }
  return total / double(y.size());
}

std::vector<HostTensor> zerosLike(const std::vector<HostTensor> &tensors) {
  std::vector<HostTensor> zeros;
  for (const HostTensor &t : tensors) {
    HostTensor z = t;
    std::fill(z.bytes.begin(), z.bytes.end(), 0);
    zeros.push_back(std::move(z));
  }
  return zeros;
}

} // namespace

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

llvm::Error switchyard::runtime::validate(const TrainConfig &config) {
  auto bad = [](llvm::StringRef name, llvm::StringRef expected,
                const llvm::Twine &found) {
    return failure("--" + name + ": expected " + expected + ", found " +
                   found);
  };
  for (auto [name, value] :
       {std::pair{"steps", config.steps}, std::pair{"batch", config.batch},
        std::pair{"eval-batches", config.evalBatches}})
    if (value < 1)
      return bad(name, "a positive count", llvm::Twine(value));
  for (auto [name, value] :
       {std::pair{"warmup", config.warmup},
        std::pair{"eval-every", config.evalEvery},
        std::pair{"checkpoint-every", config.checkpointEvery},
        std::pair{"interrupt-after", config.stopAfter}})
    if (value < 0)
      return bad(name, "a count of steps, 0 or more", llvm::Twine(value));
  if (!std::isfinite(config.lr) || config.lr <= 0)
    return bad("lr", "a positive finite learning rate", shortest(config.lr));
  for (auto [name, value] : {std::pair{"clip", config.clip},
                             std::pair{"weight-decay", config.weightDecay}})
    if (!std::isfinite(value) || value < 0)
      return bad(name, "a finite number, 0 (off) or more", shortest(value));
  for (auto [name, value] :
       {std::pair{"beta1", config.beta1}, std::pair{"beta2", config.beta2}})
    if (!(value >= 0 && value < 1))
      return bad(name, "a number in [0, 1)", shortest(value));
  if (!std::isfinite(config.eps) || config.eps <= 0)
    return bad("eps", "a positive finite number", shortest(config.eps));
  if (config.checkpointEvery > 0 && config.checkpoint.empty())
    return failure("--checkpoint-every: periodic checkpoints need a "
                   "--checkpoint path");
  if (!config.resume.empty() && !config.initFrom.empty())
    return failure("a run either resumes from a checkpoint or starts from "
                   "parameter files, not both");
  return llvm::Error::success();
}

double switchyard::runtime::scheduledLr(const TrainConfig &config,
                                        int64_t step) {
  double warm = config.warmup > 0
                    ? std::min(1.0, double(step) / double(config.warmup))
                    : 1.0;
  double progress = std::clamp(double(step) / double(config.steps), 0.0, 1.0);
  return config.lr * warm * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

namespace {
/// evaluate() with the parameters already on the program's backend.
/// The mean validation loss over `windowCount` windows in batches of
/// `batch`; with `comm`, the batches (XL: the streams) are shared out among
/// the ranks and the sums added across them.
Expected<EvalRecord> evaluateResident(Program &program,
                                      const TokenCorpus &corpus,
                                      const Resident &params,
                                      int64_t windowCount, int64_t batch,
                                      Communicator *comm = nullptr) {
  if (windowCount < 1 || batch < 1)
    return failure("evaluation needs at least one window and a positive "
                   "batch");
  Expected<ModelInfo> model =
      modelOf(program, /*training=*/false, corpus.vocab);
  if (!model)
    return model.takeError();
  int64_t time = model->time;
  if (corpus.valid.size() < size_t(time + 1))
    return failure(llvm::formatv("the validation text ({0} tokens) is shorter "
                                 "than one window of {1} tokens",
                                 corpus.valid.size(), time + 1));
  // A model with a static batch size takes exactly that many windows.
  const TensorSpec &tokenSpec = model->forward->arguments.front();
  if (tokenSpec.shape[0] > 0)
    batch = tokenSpec.shape[0];
  // The logits come back to the host; the XL memories stay resident.
  llvm::SmallVector<bool, 4> keep(1 + model->memories, true);
  keep[0] = false;
  auto run = [&](llvm::ArrayRef<size_t> offsets,
                 Resident &memories) -> Expected<double> {
    auto [tokens, targets] = windows(corpus.valid, offsets, time);
    Expected<std::vector<CallArgument>> args =
        bind(*model->forward, {&tokens, &memories, &params});
    if (!args)
      return args.takeError();
    Expected<std::vector<CallResult>> out =
        program.callResident(model->forward->name, *args, keep);
    if (!out)
      return out.takeError();
    for (size_t i = 0; i < memories.size(); ++i)
      memories[i] = std::move((*out)[1 + i].device);
    return crossEntropy((*out)[0].host, targets);
  };

  double total = 0;
  int64_t done = 0;
  if (model->memories > 0) {
    // XL: `batch` contiguous streams, segment after segment, memories
    // carried; at least one segment, at most the streams' length.
    int64_t segments = segmentsPerStream(corpus.valid.size(), batch, time);
    if (segments < 1)
      return failure(llvm::formatv(
          "the validation text ({0} tokens) is too short for {1} streams of "
          "one window of {2} tokens",
          corpus.valid.size(), batch, time + 1));
    segments = std::min(segments, (windowCount + batch - 1) / batch);
    // This rank's streams (all of them on one rank).
    int64_t local = comm ? batch / comm->size() : batch;
    int64_t first = comm ? comm->rank() * local : 0;
    Expected<Resident> memories =
        uploadAll(program, freshMemories(*model, local));
    if (!memories)
      return memories.takeError();
    for (int64_t q = 0; q < segments; ++q) {
      std::vector<size_t> offsets =
          segmentOffsets(corpus.valid.size(), batch, time, q);
      Expected<double> loss =
          run(llvm::ArrayRef<size_t>(offsets).slice(first, local), *memories);
      if (!loss)
        return loss.takeError();
      total += *loss * double(local);
      done += local;
    }
  } else {
    // Evenly spaced, fixed windows over the validation text.
    size_t span = corpus.valid.size() - size_t(time) - 1;
    Resident none;
    // Batch c on rank c mod ranks.
    for (int64_t start = 0, c = 0; start < windowCount; start += batch, ++c) {
      if (comm && c % comm->size() != comm->rank())
        continue;
      int64_t count = std::min(batch, windowCount - start);
      std::vector<size_t> offsets;
      for (int64_t i = 0; i < count; ++i)
        offsets.push_back(
            size_t(double(span) * double(start + i) /
                   double(std::max<int64_t>(windowCount - 1, 1))));
      Expected<double> loss = run(offsets, none);
      if (!loss)
        return loss.takeError();
      total += *loss * double(count);
      done += count;
    }
  }
  if (comm) {
    std::array<double, 2> sums = {total, double(done)};
    if (llvm::Error error = comm->allReduceSum(sums))
      return std::move(error);
    total = sums[0];
    done = int64_t(sums[1]);
  }
  EvalRecord record;
  record.loss = total / double(done);
  record.bitsPerByte =
      record.loss / std::numbers::ln2 / corpus.validBytesPerToken;
  return record;
}
} // namespace

Expected<EvalRecord>
switchyard::runtime::evaluate(Program &program, const TokenCorpus &corpus,
                              const std::vector<HostTensor> &params,
                              int64_t windowCount, int64_t batch) {
  // Uploaded once for all the windows.
  Expected<Resident> resident = uploadAll(program, params);
  if (!resident)
    return resident.takeError();
  return evaluateResident(program, corpus, *resident, windowCount, batch);
}

Expected<std::vector<HostTensor>> switchyard::runtime::loadParams(
    Program &program, llvm::ArrayRef<std::string> paths,
    llvm::StringRef tokenizer, const ParamFileOptions &options) {
  Expected<ModelInfo> model =
      modelOf(program, /*training=*/false, /*corpusVocab=*/0);
  if (!model)
    return model.takeError();
  ParamFileOptions checked = options;
  std::string name = model->forward->name;
  std::map<std::string, std::string> settings{{"tokenizer", tokenizer.str()}};
  checked.checkFile = [&](const std::string &path,
                          const TensorMetadata &metadata) -> llvm::Error {
    auto format = metadata.find("format");
    if (format == metadata.end() ||
        !llvm::StringRef(format->second).starts_with("switchyard-checkpoint"))
      return llvm::Error::success();
    return checkCheckpoint(path, metadata, name, settings, settings);
  };
  return readParamFiles(program.params(), paths, checked);
}

/// Calls `function` with `bindings`, results kept on the backend where
/// `keep` says.
static Expected<std::vector<CallResult>> callBound(Program &program,
                                                   const FunctionSpec &function,
                                                   const Bindings &bindings,
                                                   llvm::ArrayRef<bool> keep) {
  Expected<std::vector<CallArgument>> args = bind(function, bindings);
  if (!args)
    return args.takeError();
  return program.callResident(function.name, *args, keep);
}

/// One data-parallel step on this rank's slice of the batch, with the
/// results of `_train_step`: `_grad` on the slice, its loss and gradients
/// averaged across the ranks, then `_optimizer_step` with the averages.
/// With `nccl` they are averaged where `_grad` left them (device memory),
/// else on the host through `comm` (one all-reduce of them all).
/// `averagingSeconds` receives the time the averaging took.
static Expected<std::vector<CallResult>>
dataParallelStep(Program &program, const FunctionSpec &grad,
                 const FunctionSpec &update, Bindings bindings,
                 Communicator *comm, NcclGroup *nccl,
                 double &averagingSeconds) {
  size_t count = bindings.params->size();
  // The loss and the gradients to the host unless NCCL averages them; the
  // next memories stay.
  llvm::SmallVector<bool> keepGrad(grad.results.size(), true);
  if (!nccl)
    for (size_t i = 0; i <= count; ++i)
      keepGrad[i] = false;
  Expected<std::vector<CallResult>> local =
      callBound(program, grad, bindings, keepGrad);
  if (!local)
    return local.takeError();
  auto start = std::chrono::steady_clock::now();
  HostTensor loss;
  std::vector<HostTensor> gradients;
  Resident residentGradients;
  if (nccl) {
    std::vector<DeviceTensor *> tensors;
    for (size_t i = 0; i <= count; ++i)
      tensors.push_back((*local)[i].device.get());
    if (llvm::Error error = program.allReduceMean(tensors, *nccl))
      return std::move(error);
    Expected<HostTensor> mean = program.download(*tensors.front());
    if (!mean)
      return mean.takeError();
    loss = std::move(*mean);
    for (size_t i = 1; i <= count; ++i)
      residentGradients.push_back(std::move((*local)[i].device));
    bindings.residentGradients = &residentGradients;
  } else {
    std::vector<float> packed;
    for (size_t i = 0; i <= count; ++i) {
      std::span<const float> values = (*local)[i].host.values<float>();
      packed.insert(packed.end(), values.begin(), values.end());
    }
    if (llvm::Error error = comm->allReduceSum(packed))
      return std::move(error);
    float scale = 1.0f / float(comm->size());
    size_t at = 0;
    for (size_t i = 0; i <= count; ++i) {
      HostTensor &result = (*local)[i].host;
      size_t size = result.values<float>().size();
      std::vector<float> mean(packed.begin() + at, packed.begin() + at + size);
      for (float &x : mean)
        x *= scale;
      at += size;
      HostTensor averaged = HostTensor::fromValues<float>(
          result.name, result.type, result.shape, mean);
      if (i == 0)
        loss = std::move(averaged);
      else
        gradients.push_back(std::move(averaged));
    }
    bindings.gradients = &gradients;
  }
  averagingSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  llvm::SmallVector<bool> keepUpdate(update.results.size(), true);
  keepUpdate[0] = false;
  Expected<std::vector<CallResult>> updated =
      callBound(program, update, bindings, keepUpdate);
  if (!updated)
    return updated.takeError();
  // _train_step's layout: loss, norm, parameters, m, v, memories.
  std::vector<CallResult> results;
  results.push_back({std::move(loss), nullptr});
  for (CallResult &result : *updated)
    results.push_back(std::move(result));
  for (size_t i = 1 + count; i < local->size(); ++i)
    results.push_back(std::move((*local)[i]));
  return results;
}

Expected<TrainSummary> switchyard::runtime::train(
    Program &program, const TokenCorpus &corpus, const TrainConfig &config,
    llvm::function_ref<void(const StepRecord &)> onStep,
    llvm::function_ref<void(const EvalRecord &)> onEval) {
  if (llvm::Error error = validate(config))
    return std::move(error);
  Expected<ModelInfo> model = modelOf(program, /*training=*/true, corpus.vocab);
  if (!model)
    return model.takeError();
  const std::string name = model->forward->name;
  const FunctionSpec &stepFunction = *program.lookup(name + "_train_step");
  // Data parallelism: this rank's slice [first, first + local) of every
  // global batch.
  Communicator *comm = config.communicator;
  int64_t ranks = comm ? comm->size() : 1;
  int64_t local = config.batch / ranks;
  int64_t first = comm ? comm->rank() * local : 0;
  const FunctionSpec *gradFunction = program.lookup(name + "_grad");
  const FunctionSpec *updateFunction = program.lookup(name + "_optimizer_step");
  if (ranks > 1 && config.batch % ranks != 0)
    return failure(llvm::formatv("batch: {0} sequences cannot be shared by "
                                 "{1} ranks; use a multiple of {1}",
                                 config.batch, ranks));
  // The step as `_grad`, averaging and `_optimizer_step`: on several
  // ranks, or with NCCL (on one rank too).
  bool dataParallel = ranks > 1 || config.nccl;
  if (dataParallel && (!gradFunction || !updateFunction))
    return failure("@" + name +
                   " has no _optimizer_step: compile with "
                   "CompileOptions::optimizerStep to train on several ranks");
  if (config.nccl && config.nccl->size() != ranks)
    return failure(llvm::formatv("the NCCL group has {0} ranks and the run "
                                 "{1}",
                                 config.nccl->size(), ranks));
  int64_t time = model->time;
  if (corpus.train.size() < size_t(time + 1))
    return failure(llvm::formatv("the training text ({0} tokens) is shorter "
                                 "than one window of {1} tokens",
                                 corpus.train.size(), time + 1));
  if (corpus.valid.size() < size_t(time + 1))
    return failure(llvm::formatv("the validation text ({0} tokens) is shorter "
                                 "than one window of {1} tokens",
                                 corpus.valid.size(), time + 1));
  int64_t segments = segmentsPerStream(corpus.train.size(), config.batch, time);
  if (model->memories > 0 && segments < 1)
    return failure(llvm::formatv(
        "the training text ({0} tokens) is too short for {1} streams of one "
        "window of {2} tokens",
        corpus.train.size(), config.batch, time + 1));
  const ParamTable &table = program.params();
  std::map<std::string, std::string> settings =
      runSettings(config, corpus.tokenizer);
  if (!config.checkpoint.empty()) {
    if (llvm::Error error = checkWritable(config.checkpoint))
      return std::move(error);
    removeStaleTemporaries(config.checkpoint);
  }

  // Parameters, AdamW's two moments: refused before they are allocated
  // when they cannot fit.
  if (std::string shortfall = checkParamsFit(
          table, 3, "the parameters and AdamW's two moments");
      !shortfall.empty())
    return failure(shortfall);

  // State: fresh, or from the checkpoint to resume.
  std::vector<HostTensor> hostParams, hostM, hostV;
  std::vector<HostTensor> hostMemories = freshMemories(*model, config.batch);
  // The XL memories of this rank's streams, and all of them again for a
  // checkpoint: each rank adds its rows to zeros, summed across the ranks.
  auto ownRows = [&](std::vector<HostTensor> &all) {
    if (ranks == 1)
      return;
    for (HostTensor &memory : all) {
      int64_t row = memory.numElements() / config.batch;
      std::span<const float> values = memory.values<float>();
      std::vector<int64_t> shape = memory.shape;
      shape[0] = local;
      memory = HostTensor::fromValues<float>(
          memory.name, memory.type, shape,
          values.subspan(size_t(first * row), size_t(local * row)));
    }
  };
  auto allRows = [&](std::vector<HostTensor> &own) -> llvm::Error {
    if (ranks == 1)
      return llvm::Error::success();
    for (HostTensor &memory : own) {
      int64_t row = memory.numElements() / local;
      std::vector<float> values(size_t(config.batch * row), 0.0f);
      std::span<const float> mine = memory.values<float>();
      std::copy(mine.begin(), mine.end(), values.begin() + first * row);
      if (llvm::Error error = comm->allReduceSum(values))
        return error;
      std::vector<int64_t> shape = memory.shape;
      shape[0] = config.batch;
      memory = HostTensor::fromValues<float>(memory.name, memory.type, shape,
                                             values);
    }
    return llvm::Error::success();
  };
  int64_t start = 0;
  if (!config.resume.empty()) {
    Expected<int64_t> step =
        readCheckpoint(config.resume, name, settings,
                       legacyRunSettings(config, corpus.tokenizer), table,
                       hostParams,
                       &hostM, &hostV, &hostMemories);
    if (!step)
      return step.takeError();
    start = *step;
    if (start >= config.steps)
      return failure(llvm::formatv("{0}: the checkpoint is at step {1}, the "
                                   "run ends at step {2}: nothing to resume",
                                   config.resume, start, config.steps));
  } else if (!config.initFrom.empty()) {
    ParamFileOptions options = config.initOptions;
    options.seed = config.seed;
    Expected<std::vector<HostTensor>> loaded =
        readParamFiles(table, config.initFrom, options);
    if (!loaded)
      return loaded.takeError();
    for (const HostTensor &tensor : *loaded)
      if (tensor.type != ElementType::f32)
        return failure("parameter '" + tensor.name +
                       "': training supports f32 parameters only");
    hostParams = std::move(*loaded);
    hostM = zerosLike(hostParams);
    hostV = zerosLike(hostParams);
  } else {
    for (const ParamSpec &spec : table.params) {
      if (spec.dtype != DType::f32)
        return failure("parameter '" + spec.name +
                       "': training supports f32 parameters only");
      std::vector<float> values(size_t(spec.numElements()));
      initialize(spec, config.seed, values);
      hostParams.push_back(HostTensor::fromValues<float>(
          spec.name, ElementType::f32, spec.shape, values));
    }
    hostM = zerosLike(hostParams);
    hostV = zerosLike(hostParams);
  }
  ownRows(hostMemories);
  // The state lives on the program's backend from here on (device memory on
  // the GPU): each step replaces it with the step's results, and it comes
  // back to the host only for checkpoints.
  Resident params, m, v, memories;
  for (auto [resident, host] :
       {std::pair{&params, &hostParams}, std::pair{&m, &hostM},
        std::pair{&v, &hostV}, std::pair{&memories, &hostMemories}}) {
    Expected<Resident> uploaded = uploadAll(program, *host);
    if (!uploaded)
      return uploaded.takeError();
    *resident = std::move(*uploaded);
    host->clear();
  }

  TrainSummary summary;
  summary.model = name;
  summary.tokensPerStep = config.batch * time;
  auto evalNow = [&](int64_t step) -> llvm::Error {
    Expected<EvalRecord> record = evaluateResident(
        program, corpus, params, config.evalBatches * config.batch,
        config.batch, ranks > 1 ? comm : nullptr);
    if (!record)
      return record.takeError();
    record->step = step;
    summary.evals.push_back(*record);
    onEval(*record);
    return llvm::Error::success();
  };

  auto begin = std::chrono::steady_clock::now();
  size_t span = corpus.train.size() - size_t(time) - 1;
  size_t count = params.size();
  // Loss and gradient norm come back to the host; the new parameters,
  // moments and memories stay resident.
  llvm::SmallVector<bool> keep(stepFunction.results.size(), true);
  keep[0] = keep[1] = false;
  for (int64_t step = start + 1; step <= config.steps; ++step) {
    auto stepBegin = std::chrono::steady_clock::now();
    // The batch depends on (seed, step) only: random windows, or for XL
    // models the next segment of every stream (memories reset at the start
    // of the streams).
    std::vector<size_t> offsets;
    if (model->memories > 0) {
      int64_t segment = (step - 1) % segments;
      offsets = segmentOffsets(corpus.train.size(), config.batch, time,
                               segment);
      if (segment == 0) {
        Expected<Resident> fresh =
            uploadAll(program, freshMemories(*model, local));
        if (!fresh)
          return fresh.takeError();
        memories = std::move(*fresh);
      }
    } else {
      for (int64_t i = 0; i < config.batch; ++i)
        offsets.push_back(
            size_t(splitMix64(config.seed ^
                              splitMix64(uint64_t(step) * 1315423911u + i)) %
                   (span + 1)));
    }
    if (ranks > 1)
      offsets = std::vector<size_t>(offsets.begin() + first,
                                    offsets.begin() + first + local);
    auto [tokens, targets] = windows(corpus.train, offsets, time);
    double lr = scheduledLr(config, step);
    std::vector<float> hyper = {
        float(lr),
        float(config.beta1),
        float(config.beta2),
        float(config.eps),
        float(config.weightDecay),
        float(config.clip),
        float(1 - std::pow(config.beta1, double(step))),
        float(1 - std::pow(config.beta2, double(step)))};
    HostTensor hyperTensor =
        HostTensor::fromValues<float>("hyper", ElementType::f32, {8}, hyper);
    // Dropout masks draw from a seed of (seed, step).
    uint64_t stepSeed = splitMix64(splitMix64(config.seed) + uint64_t(step));
    if (ranks > 1)
      stepSeed = splitMix64(stepSeed ^ uint64_t(comm->rank()));
    HostTensor seedTensor = HostTensor::fromValues<int64_t>(
        "seed", ElementType::i64, {}, {int64_t(stepSeed)});
    Bindings bindings{&tokens, &memories, &params};
    bindings.targets = &targets;
    bindings.seed = &seedTensor;
    bindings.adamM = &m;
    bindings.adamV = &v;
    bindings.hyper = &hyperTensor;
    double averagingSeconds = 0;
    Expected<std::vector<CallResult>> out =
        dataParallel
            ? dataParallelStep(program, *gradFunction, *updateFunction,
                               bindings, comm, config.nccl, averagingSeconds)
            : callBound(program, stepFunction, bindings, keep);
    if (!out)
      return out.takeError();
    StepRecord record;
    record.step = step;
    record.loss = (*out)[0].host.values<float>()[0];
    record.gradNorm = (*out)[1].host.values<float>()[0];
    record.lr = lr;
    record.averagingSeconds = averagingSeconds;
    // The new state replaces the old, whose buffers go back to the pool.
    for (size_t p = 0; p < count; ++p) {
      params[p] = std::move((*out)[2 + p].device);
      m[p] = std::move((*out)[2 + count + p].device);
      v[p] = std::move((*out)[2 + 2 * count + p].device);
    }
    for (size_t i = 0; i < memories.size(); ++i)
      memories[i] = std::move((*out)[2 + 3 * count + i].device);
    record.seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - stepBegin)
                         .count();
    summary.steps.push_back(record);
    onStep(record);
    if (!std::isfinite(record.loss) || !std::isfinite(record.gradNorm))
      return failure(llvm::formatv("training diverged at step {0} (loss {1}, "
                                   "gradient norm {2}); try a lower learning "
                                   "rate",
                                   step, record.loss, record.gradNorm));

    bool stopping = config.stopAfter > 0 && step == config.stopAfter;
    bool last = step == config.steps || stopping;
    if (config.evalEvery > 0 && step % config.evalEvery == 0 && !last)
      if (llvm::Error error = evalNow(step))
        return std::move(error);
    if (!config.checkpoint.empty() &&
        (last ||
         (config.checkpointEvery > 0 && step % config.checkpointEvery == 0))) {
      std::array<std::vector<HostTensor>, 4> host;
      std::array<const Resident *, 4> state = {&params, &m, &v, &memories};
      for (auto [index, resident] : llvm::enumerate(state)) {
        Expected<std::vector<HostTensor>> copy =
            downloadAll(program, *resident);
        if (!copy)
          return copy.takeError();
        host[index] = std::move(*copy);
      }
      // Every rank holds the same parameters and moments; rank 0 writes
      // them with every stream's memories.
      if (llvm::Error error = allRows(host[3]))
        return std::move(error);
      if (!comm || comm->rank() == 0)
        if (llvm::Error error =
                saveCheckpoint(config.checkpoint, name, table, step, settings,
                               host[0], host[1], host[2], host[3]))
          return std::move(error);
    }
    if (stopping)
      break;
  }
  if (llvm::Error error =
          evalNow(summary.steps.empty() ? start : summary.steps.back().step))
    return std::move(error);
  summary.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  return summary;
}

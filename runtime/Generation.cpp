//===- Generation.cpp - sampling text from a compiled model ---------------===//

#include "runtime/Generation.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

using namespace switchyard::runtime;

namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The index of the largest logit, the lowest on a tie (NaN never wins).
int32_t argmax(std::span<const float> logits) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best] || std::isnan(logits[best]))
      best = i;
  return static_cast<int32_t>(best);
}

} // namespace

llvm::Error SamplingOptions::check() const {
  if (!(temperature >= 0) || !std::isfinite(temperature))
    return failure(llvm::formatv(
        "--temperature: expected a finite value of 0 (greedy) or more, "
        "found {0}",
        temperature));
  if (topK < 0)
    return failure(llvm::formatv(
        "--top-k: expected 0 (every token) or a positive count, found {0}",
        topK));
  if (!(topP > 0 && topP <= 1))
    return failure(llvm::formatv(
        "--top-p: expected a probability in (0, 1], found {0}", topP));
  return llvm::Error::success();
}

int32_t switchyard::runtime::sampleToken(std::span<const float> logits,
                                         const SamplingOptions &options,
                                         SamplingGenerator &generator) {
  if (options.temperature == 0 || options.topK == 1)
    return argmax(logits);
  // Candidates by decreasing logit (ties: lower id first), as many as
  // top_k keeps.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  size_t keep = options.topK > 0 ? std::min<size_t>(options.topK, logits.size())
                                 : logits.size();
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
  order.resize(keep);
  // Softmax of logit / temperature over the candidates, in double.
  double top = logits[order.front()] / options.temperature;
  std::vector<double> weights;
  double total = 0;
  for (int32_t id : order) {
    double weight = std::exp(logits[id] / options.temperature - top);
    weights.push_back(weight);
    total += weight;
  }
  // Nucleus: the most probable tokens until their mass reaches top_p.
  if (options.topP < 1) {
    double mass = 0;
    size_t kept = 0;
    while (kept < weights.size() && mass < options.topP * total)
      mass += weights[kept++];
    weights.resize(std::max<size_t>(kept, 1));
    total = std::accumulate(weights.begin(), weights.end(), 0.0);
  }
  // A uniform draw in [0, total) from the generator's raw 64 bits.
  double u = static_cast<double>(generator() >> 11) * 0x1.0p-53 * total;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (u < weights[i])
      return order[i];
    u -= weights[i];
  }
  return order[weights.size() - 1];
}

/// Checks that `decoder` is the decoding step of the model whose window
/// is `context` tokens and whose logits are `logits`: the token [1, 1],
/// the position, then caches [1, context, H, F] in pairs that the results
/// return again after the logits [1, 1, V].
static llvm::Error checkDecoder(const FunctionSpec &decoder, int64_t context,
                                const TensorSpec &logits) {
  std::vector<const TensorSpec *> data;
  for (const TensorSpec &spec : decoder.arguments)
    if (spec.param.empty())
      data.push_back(&spec);
  bool ok =
      data.size() >= 2 && data.size() % 2 == 0 && data[0]->vocab &&
      data[0]->shape == std::vector<int64_t>{1, 1} &&
      data[1]->type == ElementType::i32 && data[1]->shape.empty() &&
      decoder.results.size() == data.size() - 1 &&
      decoder.results[0].shape == std::vector<int64_t>{1, 1, logits.shape[2]} &&
      decoder.results[0].type == logits.type;
  for (size_t i = 2; ok && i < data.size(); ++i) {
    const TensorSpec &cache = *data[i], &next = decoder.results[i - 1];
    ok = cache.shape.size() == 4 && cache.shape[0] == 1 &&
         cache.shape[1] == context && cache.shape == data[i ^ 1]->shape &&
         next.shape == cache.shape && next.type == cache.type;
  }
  if (ok)
    return llvm::Error::success();
  return failure(llvm::formatv(
      "@{0} is not a decoding step of a model with a context of {1}: it "
      "should take a token [1, 1], its position and key/value caches "
      "[1, {1}, H, F], and return the logits [1, 1, V] and the caches",
      decoder.name, context));
}

llvm::Expected<LanguageModel>
LanguageModel::bind(Program &program, const FunctionSpec &function,
                    const std::vector<HostTensor> &params, bool useDecoder) {
  std::map<std::string, const HostTensor *> byName;
  for (const HostTensor &tensor : params)
    byName[tensor.name] = &tensor;
  LanguageModel model{program, function, {}, 0, 0, 0, {}, nullptr, {}, 0, {}};
  const TensorSpec *tokens = nullptr;
  std::vector<const TensorSpec *> memories;
  for (const TensorSpec &spec : function.arguments) {
    if (!spec.param.empty()) {
      auto found = byName.find(spec.param);
      if (found == byName.end())
        return failure("no value for the parameter '" + spec.param + "'");
      model.params.push_back(found->second);
    } else if (!tokens) {
      tokens = &spec;
    } else {
      memories.push_back(&spec);
    }
  }
  if (!tokens || !tokens->vocab || tokens->shape.size() != 2 ||
      tokens->shape[1] < 1)
    return failure("@" + function.name +
                   " does not take a window of token ids [?, T] with a "
                   "static T first");
  // Probes (CompileOptions::probes) follow the model's own results.
  size_t own = llvm::count_if(function.results, [](const TensorSpec &result) {
    return result.probe.empty();
  });
  if (own != 1 + memories.size() || function.results[0].shape.size() != 3 ||
      function.results[0].shape[2] < 1)
    return failure(llvm::formatv(
        "@{0} does not return logits [?, T, V] and then one next memory "
        "per memory argument ({1})",
        function.name, memories.size()));
  for (auto [i, memory] : llvm::enumerate(memories)) {
    const TensorSpec &next = function.results[1 + i];
    if (memory->type != ElementType::f32 || memory->shape.size() != 3 ||
        memory->shape[1] < 1 || memory->shape[2] < 1 ||
        next.shape != memory->shape || next.type != memory->type)
      return failure(llvm::formatv(
          "@{0}: argument #{1} after the tokens is not an f32 memory "
          "[?, M, D] that result #{2} returns again",
          function.name, i + 1, i + 1));
    std::vector<int64_t> shape = {1, memory->shape[1], memory->shape[2]};
    model.memories.push_back(HostTensor::fromValues<float>(
        "memory", ElementType::f32, shape,
        std::vector<float>(size_t(shape[1] * shape[2]), 0.0f)));
  }
  model.context = tokens->shape[1];
  model.vocab = function.results[0].shape[2];
  model.pieces = model.vocab;
  if (!useDecoder || model.hasMemories())
    return model;
  for (const FunctionSpec &candidate : program.functions())
    if (candidate.decoderOf == function.name) {
      if (llvm::Error error =
              checkDecoder(candidate, model.context, function.results[0]))
        return std::move(error);
      model.decoder = &candidate;
    }
  if (model.decoder)
    if (llvm::Error error = model.resetCaches())
      return std::move(error);
  return model;
}

llvm::Error LanguageModel::resetCaches() {
  caches.clear();
  cached = 0;
  size_t data = 0;
  for (const TensorSpec &spec : decoder->arguments) {
    // The token and the position come before the caches.
    if (!spec.param.empty() || data++ < 2)
      continue;
    HostTensor zeros{"cache", spec.type, spec.shape, {}};
    zeros.bytes.resize(size_t(zeros.numElements()) * sizeOf(spec.type));
    std::memset(zeros.bytes.data(), 0, zeros.bytes.size());
    llvm::Expected<std::unique_ptr<DeviceTensor>> cache = program.upload(zeros);
    if (!cache)
      return cache.takeError();
    caches.push_back(std::move(*cache));
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<float>> LanguageModel::decode(int32_t token) {
  assert(decoder && "the model has no decoding step");
  if (cached >= context)
    return failure(llvm::formatv(
        "the key/value caches hold {0} tokens already: they are full", cached));
  // The parameters in the decoding step's argument order, by name.
  if (residentParams.empty())
    for (const TensorSpec &spec : decoder->arguments) {
      if (spec.param.empty())
        continue;
      auto found = llvm::find_if(params, [&](const HostTensor *param) {
        return param->name == spec.param;
      });
      if (found == params.end())
        return failure("@" + decoder->name + " takes the parameter '" +
                       spec.param + "', which @" + function.name + " does not");
      llvm::Expected<std::unique_ptr<DeviceTensor>> resident =
          program.upload(**found);
      if (!resident)
        return resident.takeError();
      residentParams.push_back(std::move(*resident));
    }
  HostTensor input = HostTensor::fromValues<int32_t>("token", ElementType::i32,
                                                     {1, 1}, {token});
  HostTensor position = HostTensor::fromValues<int32_t>(
      "position", ElementType::i32, {}, {static_cast<int32_t>(cached)});
  std::vector<CallArgument> arguments;
  size_t nextParam = 0, nextData = 0;
  for (const TensorSpec &spec : decoder->arguments) {
    if (!spec.param.empty()) {
      arguments.emplace_back(residentParams[nextParam++].get());
      continue;
    }
    size_t index = nextData++;
    if (index == 0)
      arguments.emplace_back(&input);
    else if (index == 1)
      arguments.emplace_back(&position);
    else
      arguments.emplace_back(caches[index - 2].get());
  }
  // The logits come back to the host; the caches stay where they are.
  llvm::SmallVector<bool> keep(decoder->results.size(), true);
  keep[0] = false;
  llvm::Expected<std::vector<CallResult>> results =
      program.callResident(decoder->name, arguments, keep);
  if (!results)
    return results.takeError();
  for (size_t i = 0; i < caches.size(); ++i)
    caches[i] = std::move((*results)[1 + i].device);
  ++cached;
  std::span<const float> logits = (*results)[0].host.values<float>();
  return std::vector<float>(logits.begin(), logits.end());
}

llvm::Expected<std::vector<HostTensor>>
LanguageModel::run(std::span<const int32_t> tokens) {
  int64_t length = static_cast<int64_t>(tokens.size());
  if (length < 1 || length > context)
    return failure(llvm::formatv("a window of {0} tokens; the model's "
                                 "context holds 1 to {1}",
                                 length, context));
  // The tokens at positions 0 .. length-1; what follows them is padding
  // that causal attention keeps from the last token's logits.
  std::vector<int32_t> window(context, 0);
  std::copy(tokens.begin(), tokens.end(), window.begin());
  HostTensor input = HostTensor::fromValues<int32_t>("tokens", ElementType::i32,
                                                     {1, context}, window);
  std::vector<const HostTensor *> arguments;
  // The data arguments are the tokens, then the memories.
  std::vector<const HostTensor *> data = {&input};
  for (const HostTensor &memory : memories)
    data.push_back(&memory);
  size_t nextParam = 0, nextData = 0;
  for (const TensorSpec &spec : function.arguments)
    arguments.push_back(spec.param.empty() ? data[nextData++]
                                           : params[nextParam++]);
  return program.call(function.name, arguments);
}

llvm::Expected<std::vector<float>>
LanguageModel::nextLogits(std::span<const int32_t> tokens, bool advance) {
  llvm::Expected<std::vector<HostTensor>> results = run(tokens);
  if (!results)
    return results.takeError();
  int64_t length = static_cast<int64_t>(tokens.size());
  std::span<const float> logits = (*results)[0].values<float>();
  auto row = logits.subspan((length - 1) * vocab, vocab);
  std::vector<float> next(row.begin(), row.end());
  if (advance)
    for (size_t i = 0; i < memories.size(); ++i)
      memories[i] = std::move((*results)[1 + i]);
  return next;
}

/// Chooses each token from the logits after the text so far and records it:
/// appended to the text and to what is generated, and passed to `emit`.
struct TokenChooser {
  const LanguageModel &model;
  const SamplingOptions &options;
  SamplingGenerator &generator;
  const std::function<void(int32_t)> &emit;
  std::vector<int32_t> &tokens;
  std::vector<int32_t> generated = {};

  int32_t choose(const std::vector<float> &logits) {
    int32_t next =
        sampleToken(std::span<const float>(logits).first(model.pieces),
                    options, generator);
    tokens.push_back(next);
    generated.push_back(next);
    if (emit)
      emit(next);
    return next;
  }
};

/// generate() with the model's decoding step: the caches filled from the
/// prompt `tokens` (at most the context), then one decoding step per
/// token; full caches are rebuilt from the last half-context of tokens.
static llvm::Expected<std::vector<int32_t>>
generateDecoding(LanguageModel &model, std::vector<int32_t> &tokens,
                 int64_t count, const SamplingOptions &options,
                 SamplingGenerator &generator,
                 const std::function<void(int32_t)> &emit) {
  // The logits after the last of `tokens` that `from` on are decoded
  // into empty caches.
  auto refill = [&](size_t from) -> llvm::Expected<std::vector<float>> {
    if (llvm::Error error = model.resetCaches())
      return std::move(error);
    std::vector<float> logits;
    for (size_t i = from; i < tokens.size(); ++i) {
      llvm::Expected<std::vector<float>> next = model.decode(tokens[i]);
      if (!next)
        return next.takeError();
      logits = std::move(*next);
    }
    return logits;
  };
  llvm::Expected<std::vector<float>> logits = refill(0);
  TokenChooser chooser{model, options, generator, emit, tokens};
  for (int64_t step = 0; step < count; ++step) {
    if (!logits)
      return logits.takeError();
    int32_t next = chooser.choose(*logits);
    if (step + 1 == count)
      break;
    size_t keep = std::max<int64_t>(model.context / 2, 1);
    logits = model.cached < model.context ? model.decode(next)
                                          : refill(tokens.size() - keep);
  }
  return std::move(chooser.generated);
}

llvm::Expected<std::vector<int32_t>> switchyard::runtime::generate(
    LanguageModel &model, std::span<const int32_t> prompt, int64_t count,
    const SamplingOptions &options, const std::function<void(int32_t)> &emit) {
  if (llvm::Error error = options.check())
    return std::move(error);
  if (prompt.empty())
    return failure("the prompt is empty: generation needs at least one token");
  if (!model.hasMemories() &&
      static_cast<int64_t>(prompt.size()) > model.context)
    return failure(llvm::formatv(
        "the prompt is {0} tokens long; the model's context is {1}",
        prompt.size(), model.context));
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= model.vocab)
      return failure(llvm::formatv(
          "prompt token {0} at position {1} is outside the vocabulary [0, {2})",
          prompt[i], i, model.vocab));
  SamplingGenerator generator(options.seed);
  size_t context = static_cast<size_t>(model.context);
  std::vector<int32_t> tokens(prompt.begin(), prompt.end());
  if (model.hasDecoder())
    return generateDecoding(model, tokens, count, options, generator, emit);
  TokenChooser chooser{model, options, generator, emit, tokens};
  // With memories, the window is the current segment: [segment, end).
  size_t segment = 0;
  if (model.hasMemories())
    for (; tokens.size() - segment > context; segment += context)
      if (llvm::Error error =
              model
                  .nextLogits(std::span<const int32_t>(tokens).subspan(segment,
                                                                       context),
                              /*advance=*/true)
                  .takeError())
        return std::move(error);
  for (int64_t step = 0; step < count; ++step) {
    size_t start = model.hasMemories()       ? segment
                   : tokens.size() > context ? tokens.size() - context
                                             : 0;
    bool full = model.hasMemories() && tokens.size() - start == context;
    llvm::Expected<std::vector<float>> logits = model.nextLogits(
        std::span<const int32_t>(tokens).subspan(start), /*advance=*/full);
    if (!logits)
      return logits.takeError();
    if (full)
      segment += context;
    chooser.choose(*logits);
  }
  return std::move(chooser.generated);
}

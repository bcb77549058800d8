//===- Checkpoint.cpp - training checkpoints and their settings -----------===//
//
// Writes and reads training checkpoints: one safetensors file (written
// atomically) with the parameters, AdamW's two moments and the
// Transformer-XL memories, and as metadata the format, the model, the step
// and the run settings that a resumed or evaluated run must share.
// Checkpoints of format 1 are still read: their settings are compared as
// that format recorded them, and their XL positional weights are converted
// to the current encoding as they are read.
//
//===----------------------------------------------------------------------===//

#include "runtime/ParamFiles.h"
#include "runtime/Training.h"
#include "runtime/TrainingInternal.h"

#include "llvm/Support/FormatVariadic.h"

#include <charconv>
#include <map>

using namespace switchyard::runtime;
using namespace switchyard::runtime::training;
using llvm::Expected;

std::string training::shortest(double value) {
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return std::string(text, end);
}

std::map<std::string, std::string>
training::legacyRunSettings(const TrainConfig &config,
                            const std::string &tokenizer) {
  return {{"seed", std::to_string(config.seed)},
          {"steps", std::to_string(config.steps)},
          {"batch", std::to_string(config.batch)},
          {"warmup", std::to_string(config.warmup)},
          {"lr", llvm::formatv("{0}", config.lr).str()},
          {"tokenizer", tokenizer}};
}

std::map<std::string, std::string>
training::runSettings(const TrainConfig &config, const std::string &tokenizer) {
  // Floats as their shortest exact text: two settings compare equal only
  // when they are.
  return {{"seed", std::to_string(config.seed)},
          {"steps", std::to_string(config.steps)},
          {"batch", std::to_string(config.batch)},
          {"warmup", std::to_string(config.warmup)},
          {"lr", shortest(config.lr)},
          {"clip", shortest(config.clip)},
          {"weight_decay", shortest(config.weightDecay)},
          {"beta1", shortest(config.beta1)},
          {"beta2", shortest(config.beta2)},
          {"eps", shortest(config.eps)},
          {"tokenizer", tokenizer}};
}

llvm::Error training::saveCheckpoint(
    const std::string &path, const std::string &model, const ParamTable &table,
    int64_t step, const std::map<std::string, std::string> &settings,
    const std::vector<HostTensor> &params, const std::vector<HostTensor> &m,
    const std::vector<HostTensor> &v, const std::vector<HostTensor> &memories) {
  std::vector<HostTensor> tensors;
  for (size_t p = 0; p < params.size(); ++p) {
    tensors.push_back(params[p]);
    tensors.back().name = table.params[p].name;
  }
  for (auto [prefix, state] :
       {std::pair{"optimizer.m.", &m}, std::pair{"optimizer.v.", &v}})
    for (size_t p = 0; p < state->size(); ++p) {
      tensors.push_back((*state)[p]);
      tensors.back().name = prefix + table.params[p].name;
    }
  for (size_t i = 0; i < memories.size(); ++i) {
    tensors.push_back(memories[i]);
    tensors.back().name = "state.memory." + std::to_string(i);
  }
  std::map<std::string, std::string> metadata = settings;
  metadata["format"] = kCheckpointFormat;
  metadata["model"] = model;
  metadata["step"] = std::to_string(step);
  return writeSafetensors(path, tensors, metadata);
}

llvm::Error training::checkCheckpoint(
    const std::string &path, const TensorMetadata &metadata,
    const std::string &model,
    const std::map<std::string, std::string> &settings,
    const std::map<std::string, std::string> &legacySettings) {
  auto meta = [&](const std::string &key) -> std::string {
    auto it = metadata.find(key);
    return it == metadata.end() ? std::string() : it->second;
  };
  // Version 1 differs only in the XL positional weights, which
  // readCheckpoint converts.
  if (meta("format") != kCheckpointFormat &&
      meta("format") != "switchyard-checkpoint-1")
    return failure(path +
                   ": not a Switchyard training checkpoint (expected "
                   "metadata format = " +
                   kCheckpointFormat + ", found '" + meta("format") + "')");
  if (meta("model") != model)
    return failure(path + ": a checkpoint of model @" + meta("model") +
                   ", not of @" + model);
  // Format 1 recorded fewer settings, the learning rate rounded.
  bool legacy = meta("format") == "switchyard-checkpoint-1";
  for (const auto &[key, value] : legacy ? legacySettings : settings)
    if (meta(key) != value)
      return failure(path + ": the checkpoint was written with " + key +
                     " = '" + meta(key) + "', this run has '" + value +
                     "'; resume and evaluate with the same settings");
  return llvm::Error::success();
}

Expected<int64_t> training::readCheckpoint(
    const std::string &path, const std::string &model,
    const std::map<std::string, std::string> &settings,
    const std::map<std::string, std::string> &legacySettings,
    const ParamTable &table, std::vector<HostTensor> &params,
    std::vector<HostTensor> *m, std::vector<HostTensor> *v,
    std::vector<HostTensor> *memories) {
  TensorMetadata metadata;
  Expected<std::vector<HostTensor>> tensors = readSafetensors(path, &metadata);
  if (!tensors)
    return tensors.takeError();
  auto meta = [&](const std::string &key) -> std::string {
    auto it = metadata.find(key);
    return it == metadata.end() ? std::string() : it->second;
  };
  if (llvm::Error error =
          checkCheckpoint(path, metadata, model, settings, legacySettings))
    return std::move(error);
  std::map<std::string, HostTensor *> byName;
  for (HostTensor &tensor : *tensors)
    byName[tensor.name] = &tensor;
  auto take = [&](const std::string &name, const std::vector<int64_t> &shape,
                  ElementType type) -> Expected<HostTensor> {
    auto it = byName.find(name);
    if (it == byName.end())
      return failure(path + ": tensor '" + name + "' is missing");
    if (it->second->shape != shape || it->second->type != type)
      return failure(path + ": tensor '" + name +
                     "' does not have the shape and type the model declares");
    if (llvm::Error error =
            checkFinite(*it->second, path + ": tensor '" + name + "'"))
      return std::move(error);
    return *it->second;
  };
  params.clear();
  for (const ParamSpec &spec : table.params) {
    Expected<HostTensor> tensor =
        take(spec.name, spec.shape, ElementType::f32);
    if (!tensor)
      return tensor.takeError();
    params.push_back(std::move(*tensor));
  }
  for (auto [prefix, state] :
       {std::pair{"optimizer.m.", m}, std::pair{"optimizer.v.", v}}) {
    if (!state)
      continue;
    state->clear();
    for (const ParamSpec &spec : table.params) {
      Expected<HostTensor> tensor =
          take(prefix + spec.name, spec.shape, ElementType::f32);
      if (!tensor)
        return tensor.takeError();
      state->push_back(std::move(*tensor));
    }
  }
  if (memories)
    for (size_t i = 0; i < memories->size(); ++i) {
      HostTensor &memory = (*memories)[i];
      Expected<HostTensor> tensor = take("state.memory." + std::to_string(i),
                                         memory.shape, memory.type);
      if (!tensor)
        return tensor.takeError();
      memory = std::move(*tensor);
    }
  if (hasLegacyXlPositions(metadata))
    for (size_t p = 0; p < table.params.size(); ++p) {
      if (!isXlPositionWeight(table, table.params[p]))
        continue;
      convertLegacyXlPosition(params[p], /*secondMoment=*/false);
      if (m)
        convertLegacyXlPosition((*m)[p], /*secondMoment=*/false);
      if (v)
        convertLegacyXlPosition((*v)[p], /*secondMoment=*/true);
    }
  int64_t step = 0;
  if (llvm::StringRef(meta("step")).getAsInteger(10, step) || step < 0)
    return failure(path + ": metadata step is not a step number ('" +
                   meta("step") + "')");
  return step;
}

//===- TrainingInternal.h - what the training files share -------*- C++ -*-===//
//
// Internal to the runtime: what Training.cpp (the training loop and
// evaluation), Corpus.cpp (corpora and batches), Checkpoint.cpp
// (checkpoints and the settings they record) and Tokenizer.cpp (bytes and
// SentencePiece) use of each other. Callers use Training.h.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_TRAININGINTERNAL_H
#define SWITCHYARD_RUNTIME_TRAININGINTERNAL_H

#include "runtime/Training.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace switchyard::runtime::training {

/// An llvm::Error with `message`.
inline llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The shortest text that reads back as the same double.
std::string shortest(double value);

//===----------------------------------------------------------------------===//
// Batches (Corpus.cpp)
//===----------------------------------------------------------------------===//

/// XL models read contiguous streams: stream i of `batch` covers
/// [i·L, (i+1)·L) of the text, L = size / batch, and segment q starts at
/// i·L + q·T. The number of whole segments per stream.
int64_t segmentsPerStream(size_t size, int64_t batch, int64_t time);

/// Where segment `segment` of each of the `batch` streams starts.
std::vector<size_t> segmentOffsets(size_t size, int64_t batch, int64_t time,
                                   int64_t segment);

/// Token ids and next-token targets, [offsets.size(), time], of the windows
/// starting at `offsets` (each of time + 1 tokens).
std::pair<HostTensor, HostTensor> windows(const std::vector<int32_t> &text,
                                          llvm::ArrayRef<size_t> offsets,
                                          int64_t time);

//===----------------------------------------------------------------------===//
// Checkpoints (Checkpoint.cpp)
//===----------------------------------------------------------------------===//

/// The run settings a resumed run must share with the original one.
std::map<std::string, std::string> runSettings(const TrainConfig &config,
                                               const std::string &tokenizer);

/// The settings as checkpoints of format 1 recorded them: fewer keys, and
/// the learning rate in formatv's default format (two decimals).
std::map<std::string, std::string>
legacyRunSettings(const TrainConfig &config, const std::string &tokenizer);

/// Writes the checkpoint of `model` at `step` to `path`: the parameters
/// under the names of `table`, AdamW's moments `m` and `v` under
/// `optimizer.m.` and `optimizer.v.`, the XL memories as `state.memory.<i>`,
/// and `settings` with the format, model and step as metadata.
llvm::Error saveCheckpoint(const std::string &path, const std::string &model,
                           const ParamTable &table, int64_t step,
                           const std::map<std::string, std::string> &settings,
                           const std::vector<HostTensor> &params,
                           const std::vector<HostTensor> &m,
                           const std::vector<HostTensor> &v,
                           const std::vector<HostTensor> &memories);

/// Checks that `metadata` is that of a training checkpoint of `model`
/// written with `settings` (`legacySettings` for format 1).
llvm::Error
checkCheckpoint(const std::string &path, const TensorMetadata &metadata,
                const std::string &model,
                const std::map<std::string, std::string> &settings,
                const std::map<std::string, std::string> &legacySettings);

/// Reads a checkpoint of `model`: parameters, and the optimizer state when
/// `m` and `v` are given, and XL memories when `memories` is (as many as it
/// holds, which must match in shape); every entry of `settings` (of
/// `legacySettings` for a format-1 checkpoint) must match the checkpoint's.
/// Returns the step it was written at.
llvm::Expected<int64_t>
readCheckpoint(const std::string &path, const std::string &model,
               const std::map<std::string, std::string> &settings,
               const std::map<std::string, std::string> &legacySettings,
               const ParamTable &table, std::vector<HostTensor> &params,
               std::vector<HostTensor> *m, std::vector<HostTensor> *v,
               std::vector<HostTensor> *memories = nullptr);

} // namespace switchyard::runtime::training

#endif // SWITCHYARD_RUNTIME_TRAININGINTERNAL_H

//===- Training.h - training and evaluation loops ---------------*- C++ -*-===//
//
// Trains and evaluates compiled language models on any backend (a Program:
// CpuProgram or GpuProgram): byte-level corpora, deterministic batches, the
// cosine learning-rate schedule with linear warm-up, the compiled AdamW step
// (<model>_train_step), validation in bits per byte, and checkpoints
// (parameters and optimizer state in one safetensors file, written
// atomically) that resume exactly.
//
// Batches depend only on (seed, step), and the state is fully in the
// checkpoint, so a resumed run repeats an uninterrupted one bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_TRAINING_H
#define SWITCHYARD_RUNTIME_TRAINING_H

#include "runtime/Distributed.h"
#include "runtime/ParamFiles.h"
#include "runtime/Program.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace switchyard::runtime {

/// A byte-level text corpus split into training and validation text: every
/// n-th block (n = 1 / validFraction; 4 KiB blocks, smaller for small texts)
/// is held out for validation.
struct ByteCorpus {
  std::vector<uint8_t> train, valid;
  /// Where it came from, for reports.
  std::string source;

  /// Concatenates the files in `paths` (a directory contributes its plain
  /// files, sorted by name) and holds out about `validFraction` of it, in
  /// interleaved blocks, for validation.
  static llvm::Expected<ByteCorpus> load(llvm::ArrayRef<std::string> paths,
                                         double validFraction);
  /// The default corpus: the plain text of Debian's `fortunes` package
  /// (/usr/share/games/fortunes), without its index files and `%` lines.
  static llvm::Expected<ByteCorpus> loadFortunes(double validFraction);
};

/// Text as token ids, split for training and validation: bytes, or
/// SentencePiece subwords.
struct TokenCorpus {
  std::vector<int32_t> train, valid;
  /// Ids lie in [0, vocab).
  int64_t vocab = 256;
  /// Bytes of text per token, to report bits per byte.
  double trainBytesPerToken = 1.0, validBytesPerToken = 1.0;
  std::string source;
  /// Identifies the tokenizer ("bytes", or "sentencepiece:<pieces>:<hash>");
  /// checkpoints record it and refuse another.
  std::string tokenizer = "bytes";

  /// The bytes themselves as ids (vocabulary 256).
  static TokenCorpus fromBytes(const ByteCorpus &bytes);

  /// The entropy of the training token distribution, in bits per byte:
  /// what a model that knows only token frequencies achieves.
  double unigramEntropyBits() const;
};

/// A SentencePiece subword tokenizer (Debian's libsentencepiece), trained
/// on the training text only.
class SentencePieceTokenizer {
public:
  ~SentencePieceTokenizer();
  SentencePieceTokenizer(const SentencePieceTokenizer &) = delete;
  SentencePieceTokenizer &operator=(const SentencePieceTokenizer &) = delete;

  /// Trains a unigram model of `vocabSize` pieces (byte fallback: no
  /// unknown tokens) on the training part of `corpus`.
  static llvm::Expected<std::unique_ptr<SentencePieceTokenizer>>
  train(const ByteCorpus &corpus, int64_t vocabSize);
  /// Loads a model written by save() (or by the spm_train tool).
  static llvm::Expected<std::unique_ptr<SentencePieceTokenizer>>
  load(llvm::StringRef path);
  /// Writes the model.
  llvm::Error save(llvm::StringRef path) const;

  int64_t vocabSize() const;
  /// What checkpoints record of the tokenizer:
  /// "sentencepiece:<pieces>:<hash of the model>".
  std::string identity() const;
  /// Encodes both parts of `corpus`, line by line (lines are modelled
  /// verbatim: identity normalisation, whitespace kept; the newlines
  /// themselves are not tokens and not counted as bytes).
  llvm::Expected<TokenCorpus> encode(const ByteCorpus &corpus) const;
  /// Encodes one piece of text (a prompt) as the lines of a corpus are.
  llvm::Expected<std::vector<int32_t>> encodeText(llvm::StringRef text) const;
  /// The text of `ids` (byte pieces joined into the bytes they stand for).
  llvm::Expected<std::string> decode(llvm::ArrayRef<int32_t> ids) const;
  /// Token `id`'s piece as the model spells it ("▁the", "<0x0A>"); "#id"
  /// for an id outside the vocabulary.
  std::string piece(int32_t id) const;

private:
  SentencePieceTokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// Hyperparameters and bookkeeping of a run.
struct TrainConfig {
  int64_t steps = 300;
  int64_t batch = 8;
  int64_t warmup = 30;
  double lr = 2e-3;
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-8;
  double weightDecay = 0.0;
  double clip = 0.25;
  uint64_t seed = 0;
  /// Validate every this many steps (0: only at the end).
  int64_t evalEvery = 100;
  /// Validation windows: evalBatches × batch sequences.
  int64_t evalBatches = 4;
  /// Write a checkpoint here every `checkpointEvery` steps and at the end.
  std::string checkpoint;
  int64_t checkpointEvery = 0;
  /// Resume from this checkpoint.
  std::string resume;
  /// Start from the parameters in these files instead of the initialisers
  /// (by the rules of ParamFiles.h: Switchyard's or the official names),
  /// with fresh optimizer state; not together with `resume`. The options'
  /// seed is replaced by `seed`.
  std::vector<std::string> initFrom;
  ParamFileOptions initOptions;
  /// End the run after this step, as an interruption would (the schedule
  /// still runs to `steps`; a checkpoint is written at the stop). 0: never.
  int64_t stopAfter = 0;
  /// Data parallelism: the ranks that train together (null or one rank:
  /// this process alone). Each rank takes its slice of every batch (`batch`
  /// is the global batch, a multiple of the ranks; the data order is the
  /// same for any number of ranks), runs `_grad` on it, and the gradients
  /// and losses are averaged across the ranks before the clipping and
  /// AdamW (`_optimizer_step`: compile with CompileOptions::optimizerStep).
  /// Rank 0 writes the checkpoints, which hold the global state (XL
  /// memories of every stream), so a run resumes on any number of ranks.
  /// Dropout masks are drawn per rank (seeded by the rank too).
  Communicator *communicator = nullptr;
  /// With a GPU program: the ranks' GPUs (NCCL), which average the loss
  /// and gradients in device memory, where `_grad` left them, instead of
  /// on the host through `communicator` (whose ranks they must be). With
  /// one rank the steps still take that route (`_grad`, the all-reduce,
  /// `_optimizer_step`), as a measure of what it costs.
  NcclGroup *nccl = nullptr;
};

struct StepRecord {
  int64_t step = 0;
  double loss = 0, gradNorm = 0, lr = 0, seconds = 0;
  /// Of `seconds`, the time the ranks took to average the loss and
  /// gradients (data-parallel steps; 0 otherwise).
  double averagingSeconds = 0;
};

struct EvalRecord {
  int64_t step = 0;
  /// Mean loss per token (nats), and the same in bits per byte of text.
  double loss = 0, bitsPerByte = 0;
};

/// What a run did.
struct TrainSummary {
  std::string model;
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
  int64_t tokensPerStep = 0;
  double seconds = 0;
};

/// Checks every setting of `config` (counts, rates, their combinations); the
/// error names the setting as the command line does (`lr`, `clip`, ...),
/// what it expects and what it found.
llvm::Error validate(const TrainConfig &config);

/// The learning rate at `step` (1-based): linear warm-up to `lr`, then a
/// cosine decay to 0 at `steps`.
double scheduledLr(const TrainConfig &config, int64_t step);

/// Trains the model of `program` (compiled with `trainStep`) on `corpus`.
/// `onStep` and `onEval` report progress.
llvm::Expected<TrainSummary>
train(Program &program, const TokenCorpus &corpus, const TrainConfig &config,
      llvm::function_ref<void(const StepRecord &)> onStep,
      llvm::function_ref<void(const EvalRecord &)> onEval);

/// The mean validation loss of `params` (by name) on `corpus`, over
/// `windows` sequences.
llvm::Expected<EvalRecord> evaluate(Program &program,
                                    const TokenCorpus &corpus,
                                    const std::vector<HostTensor> &params,
                                    int64_t windows, int64_t batch);

/// Reads the parameters of `program` from `paths` by the rules of
/// ParamFiles.h: checkpoints written by `train` (checked to belong to the
/// program's model and to have been trained with `tokenizer`) or any other
/// parameter files, e.g. under the official names.
llvm::Expected<std::vector<HostTensor>>
loadParams(Program &program, llvm::ArrayRef<std::string> paths,
           llvm::StringRef tokenizer, const ParamFileOptions &options);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_TRAINING_H

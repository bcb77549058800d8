//===- Tokenizer.cpp - bytes and SentencePiece subwords as tokens ---------===//
//
// Turns a byte corpus into token ids: the bytes themselves (vocabulary 256),
// or SentencePiece subwords from Debian's libsentencepiece, trained on the
// training text line by line and identified by a hash of the model, which
// checkpoints record.
//
//===----------------------------------------------------------------------===//

#include "runtime/Training.h"
#include "runtime/TrainingInternal.h"

#include "llvm/Support/FormatVariadic.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

using namespace switchyard::runtime;
using namespace switchyard::runtime::training;
using llvm::Expected;

//===----------------------------------------------------------------------===//
// Bytes
//===----------------------------------------------------------------------===//

TokenCorpus TokenCorpus::fromBytes(const ByteCorpus &bytes) {
  TokenCorpus corpus;
  corpus.train.assign(bytes.train.begin(), bytes.train.end());
  corpus.valid.assign(bytes.valid.begin(), bytes.valid.end());
  corpus.vocab = 256;
  corpus.source = bytes.source + ", as bytes";
  return corpus;
}

//===----------------------------------------------------------------------===//
// SentencePiece
//===----------------------------------------------------------------------===//

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceTokenizer::SentencePieceTokenizer()
    : impl(std::make_unique<Impl>()) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

namespace {
/// Feeds the non-empty lines of a text (cut to at most 2 KiB) to
/// SentencePiece.
class LineIterator : public sentencepiece::SentenceIterator {
public:
  explicit LineIterator(const std::vector<uint8_t> &text) : text(text) {
    Next();
  }
  bool done() const override { return finished; }
  /// Lines longer than this are cut (SentencePiece skips long sentences).
  static constexpr size_t kMaxLine = 2048;

  void Next() override {
    while (position < text.size()) {
      size_t end = position;
      while (end < text.size() && text[end] != '\n' &&
             end - position < kMaxLine)
        ++end;
      // Never cut inside a UTF-8 sequence.
      while (end < text.size() && text[end] != '\n' && end > position + 1 &&
             (text[end] & 0xC0) == 0x80)
        --end;
      line.assign(text.begin() + position, text.begin() + end);
      position = end < text.size() && text[end] == '\n' ? end + 1 : end;
      if (!line.empty())
        return;
    }
    finished = true;
  }
  const std::string &value() const override { return line; }
  sentencepiece::util::Status status() const override {
    return sentencepiece::util::Status();
  }

private:
  const std::vector<uint8_t> &text;
  size_t position = 0;
  std::string line;
  bool finished = false;
};

llvm::Error spFailure(const llvm::Twine &what,
                      const sentencepiece::util::Status &status) {
  return failure(what + ": " + status.ToString());
}
} // namespace

Expected<std::unique_ptr<SentencePieceTokenizer>>
SentencePieceTokenizer::train(const ByteCorpus &corpus, int64_t vocabSize) {
  if (vocabSize < 8)
    return failure(llvm::formatv("a SentencePiece vocabulary needs at least 8 "
                                 "pieces, found {0}",
                                 vocabSize));
  LineIterator lines(corpus.train);
  std::string proto;
  // Deterministic sampling of the training sentences.
  sentencepiece::SetRandomGeneratorSeed(0);
  sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(
          {{"vocab_size", std::to_string(vocabSize)},
           {"model_type", "unigram"},
           {"character_coverage", "1.0"},
           {"byte_fallback", "true"},
           {"normalization_rule_name", "identity"},
           {"remove_extra_whitespaces", "false"},
           {"hard_vocab_limit", "false"},
           {"input_sentence_size", "300000"},
           {"shuffle_input_sentence", "true"},
           {"num_threads", "2"},
           {"minloglevel", "1"}},
          &lines, &proto);
  if (!status.ok())
    return spFailure("training the SentencePiece model", status);
  std::unique_ptr<SentencePieceTokenizer> tokenizer(
      new SentencePieceTokenizer());
  status = tokenizer->impl->processor.LoadFromSerializedProto(proto);
  if (!status.ok())
    return spFailure("loading the trained SentencePiece model", status);
  return tokenizer;
}

Expected<std::unique_ptr<SentencePieceTokenizer>>
SentencePieceTokenizer::load(llvm::StringRef path) {
  std::unique_ptr<SentencePieceTokenizer> tokenizer(
      new SentencePieceTokenizer());
  sentencepiece::util::Status status =
      tokenizer->impl->processor.Load(path.str());
  if (!status.ok())
    return spFailure(path + ": not a SentencePiece model", status);
  return tokenizer;
}

llvm::Error SentencePieceTokenizer::save(llvm::StringRef path) const {
  return writeTextFile(path, impl->processor.serialized_model_proto());
}

int64_t SentencePieceTokenizer::vocabSize() const {
  return impl->processor.GetPieceSize();
}

Expected<TokenCorpus>
SentencePieceTokenizer::encode(const ByteCorpus &corpus) const {
  TokenCorpus tokens;
  tokens.vocab = vocabSize();
  tokens.source = corpus.source + ", SentencePiece " +
                  std::to_string(tokens.vocab) + " pieces";
  auto encodePart = [&](const std::vector<uint8_t> &text,
                        std::vector<int32_t> &ids) -> Expected<double> {
    LineIterator lines(text);
    std::vector<int> piece;
    size_t bytes = 0;
    for (; !lines.done(); lines.Next()) {
      sentencepiece::util::Status status =
          impl->processor.Encode(lines.value(), &piece);
      if (!status.ok())
        return spFailure("encoding with SentencePiece", status);
      ids.insert(ids.end(), piece.begin(), piece.end());
      bytes += lines.value().size();
    }
    if (ids.empty())
      return failure("SentencePiece produced no tokens for part of the "
                     "corpus (too little text?)");
    return double(bytes) / double(ids.size());
  };
  Expected<double> trainRatio = encodePart(corpus.train, tokens.train);
  if (!trainRatio)
    return trainRatio.takeError();
  Expected<double> validRatio = encodePart(corpus.valid, tokens.valid);
  if (!validRatio)
    return validRatio.takeError();
  tokens.tokenizer = identity();
  tokens.trainBytesPerToken = *trainRatio;
  tokens.validBytesPerToken = *validRatio;
  return tokens;
}

std::string SentencePieceTokenizer::identity() const {
  // The model's size and an FNV-1a hash of its serialised proto.
  std::string proto = impl->processor.serialized_model_proto();
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : proto)
    hash = (hash ^ uint8_t(c)) * 0x100000001b3ULL;
  return llvm::formatv("sentencepiece:{0}:{1:x16}", vocabSize(), hash).str();
}

Expected<std::vector<int32_t>>
SentencePieceTokenizer::encodeText(llvm::StringRef text) const {
  std::vector<int> pieces;
  sentencepiece::util::Status status =
      impl->processor.Encode(text.str(), &pieces);
  if (!status.ok())
    return spFailure("encoding with SentencePiece", status);
  return std::vector<int32_t>(pieces.begin(), pieces.end());
}

Expected<std::string>
SentencePieceTokenizer::decode(llvm::ArrayRef<int32_t> ids) const {
  std::vector<int> pieces(ids.begin(), ids.end());
  std::string text;
  sentencepiece::util::Status status = impl->processor.Decode(pieces, &text);
  if (!status.ok())
    return spFailure("decoding with SentencePiece", status);
  return text;
}

std::string SentencePieceTokenizer::piece(int32_t id) const {
  if (id < 0 || id >= impl->processor.GetPieceSize())
    return llvm::formatv("#{0}", id).str();
  return impl->processor.IdToPiece(id);
}

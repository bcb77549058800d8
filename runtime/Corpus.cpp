//===- Corpus.cpp - text corpora and their batches ------------------------===//
//
// Reads the byte-level corpora (files, directories, Debian's fortunes),
// splits them into training and validation text in interleaved blocks, and
// cuts the windows of a batch from token text: token ids with their
// next-token targets, and the contiguous streams that Transformer-XL models
// read segment by segment.
//
//===----------------------------------------------------------------------===//

#include "runtime/Training.h"
#include "runtime/TrainingInternal.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>

using namespace switchyard::runtime;
using namespace switchyard::runtime::training;
using llvm::Expected;

//===----------------------------------------------------------------------===//
// Corpora
//===----------------------------------------------------------------------===//

/// Holds out every n-th block for validation (n = 1/fraction), so that
/// validation text is drawn from the whole corpus. Blocks are 4 KiB, or
/// smaller for small texts (at least four periods of blocks, 64 bytes).
void split(llvm::ArrayRef<uint8_t> text, double validFraction,
           ByteCorpus &corpus) {
  size_t period =
      std::max<size_t>(2, size_t(std::llround(1.0 / validFraction)));
  size_t block = std::clamp<size_t>(text.size() / (4 * period), 64, 4096);
  for (size_t start = 0, index = 0; start < text.size();
       start += block, ++index) {
    size_t end = std::min(text.size(), start + block);
    std::vector<uint8_t> &part =
        index % period == period - 1 ? corpus.valid : corpus.train;
    part.insert(part.end(), text.begin() + start, text.begin() + end);
  }
}

Expected<ByteCorpus> ByteCorpus::load(llvm::ArrayRef<std::string> paths,
                                      double validFraction) {
  if (!(validFraction > 0 && validFraction < 1))
    return failure(llvm::formatv("the validation fraction must be in (0, 1), "
                                 "found {0}",
                                 validFraction));
  std::vector<std::string> files;
  for (const std::string &path : paths) {
    if (!llvm::sys::fs::is_directory(path)) {
      files.push_back(path);
      continue;
    }
    std::error_code error;
    std::vector<std::string> inside;
    for (llvm::sys::fs::directory_iterator it(path, error), end;
         it != end && !error; it.increment(error))
      if (it->type() == llvm::sys::fs::file_type::regular_file)
        inside.push_back(it->path());
    if (error)
      return failure("cannot list '" + path + "': " + error.message());
    std::sort(inside.begin(), inside.end());
    files.insert(files.end(), inside.begin(), inside.end());
  }
  ByteCorpus corpus;
  std::vector<uint8_t> text;
  for (const std::string &file : files) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(file);
    if (!buffer)
      return failure("cannot read corpus file '" + file +
                     "': " + buffer.getError().message());
    llvm::StringRef content = (*buffer)->getBuffer();
    text.insert(text.end(), content.begin(), content.end());
  }
  corpus.source = llvm::join(paths, ", ");
  split(text, validFraction, corpus);
  return corpus;
}

Expected<ByteCorpus> ByteCorpus::loadFortunes(double validFraction) {
  const char *directory = "/usr/share/games/fortunes";
  if (!llvm::sys::fs::is_directory(directory))
    return failure("the default corpus needs Debian's fortunes package "
                   "(/usr/share/games/fortunes); install it (apt-get install "
                   "fortunes) or pass --data");
  std::vector<std::string> files;
  std::error_code error;
  for (llvm::sys::fs::directory_iterator it(directory, error), end;
       it != end && !error; it.increment(error)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    // Fortune files have no extension: skip the .dat indices and the .u8
    // links to the same text.
    if (it->type() == llvm::sys::fs::file_type::regular_file &&
        !name.contains('.'))
      files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::string text;
  for (const std::string &file : files) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(file);
    if (!buffer)
      continue;
    llvm::SmallVector<llvm::StringRef> lines;
    (*buffer)->getBuffer().split(lines, '\n');
    for (llvm::StringRef line : lines)
      if (line != "%")
        text.append(line.begin(), line.end()).push_back('\n');
  }
  if (text.empty())
    return failure("no fortune text found under /usr/share/games/fortunes");
  ByteCorpus corpus;
  corpus.source = "Debian fortunes (/usr/share/games/fortunes)";
  split(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(text.data()),
                                text.size()),
        validFraction, corpus);
  return corpus;
}

double TokenCorpus::unigramEntropyBits() const {
  std::vector<double> counts(size_t(vocab), 0.0);
  for (int32_t id : train)
    counts[size_t(id)] += 1;
  double entropy = 0;
  for (double count : counts)
    if (count > 0) {
      double p = count / double(train.size());
      entropy -= p * std::log2(p);
    }
  return entropy / trainBytesPerToken;
}

//===----------------------------------------------------------------------===//
// Batches
//===----------------------------------------------------------------------===//

int64_t training::segmentsPerStream(size_t size, int64_t batch, int64_t time) {
  size_t length = size / size_t(batch);
  return length < size_t(time) + 1 ? 0 : int64_t((length - 1) / size_t(time));
}

std::vector<size_t> training::segmentOffsets(size_t size, int64_t batch,
                                             int64_t time, int64_t segment) {
  size_t length = size / size_t(batch);
  std::vector<size_t> offsets;
  for (int64_t i = 0; i < batch; ++i)
    offsets.push_back(size_t(i) * length + size_t(segment * time));
  return offsets;
}

std::pair<HostTensor, HostTensor>
training::windows(const std::vector<int32_t> &text,
                  llvm::ArrayRef<size_t> offsets, int64_t time) {
  std::vector<int32_t> tokens, targets;
  for (size_t offset : offsets)
    for (int64_t t = 0; t < time; ++t) {
      tokens.push_back(text[offset + t]);
      targets.push_back(text[offset + t + 1]);
    }
  std::vector<int64_t> shape = {int64_t(offsets.size()), time};
  return {HostTensor::fromValues<int32_t>("tokens", ElementType::i32, shape,
                                          tokens),
          HostTensor::fromValues<int32_t>("targets", ElementType::i32, shape,
                                          targets)};
}

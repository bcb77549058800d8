//===- TensorFile.cpp - NumPy .npy and safetensors file I/O ---------------===//
//
// Implements the `.npy` and safetensors readers and writers. The npy header
// is a Python dict literal, read by a small recursive-descent parser for the
// subset of Python literals NumPy writes (strings, integers, booleans,
// tuples, lists, dicts); the safetensors header is JSON, read with
// llvm::json after a lexical pre-pass that bounds its nesting depth and
// rejects duplicate keys, which llvm::json would silently merge.
//
// Both readers load the whole file through llvm::MemoryBuffer (mmap'ed when
// large) and validate every size against the file's length before touching
// the data, so no input can make them read out of bounds.
//
//===----------------------------------------------------------------------===//

#include "runtime/TensorFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <limits>
#include <tuple>
#include <unistd.h>

using namespace switchyard::runtime;
using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

// Element bytes are copied between files and memory verbatim.
static_assert(std::endian::native == std::endian::little,
              "TensorFile assumes a little-endian host");

namespace {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

struct TypeInfo {
  ElementType type;
  const char *name;
  size_t size;
  /// The npy descr NumPy writes for this type; nullptr for bf16.
  const char *npyDescr;
  const char *safetensorsName;
};

constexpr TypeInfo kTypes[] = {
    {ElementType::f32, "f32", 4, "<f4", "F32"},
    {ElementType::f16, "f16", 2, "<f2", "F16"},
    {ElementType::bf16, "bf16", 2, nullptr, "BF16"},
    {ElementType::f64, "f64", 8, "<f8", "F64"},
    {ElementType::i32, "i32", 4, "<i4", "I32"},
    {ElementType::i64, "i64", 8, "<i8", "I64"},
    {ElementType::u8, "u8", 1, "|u1", "U8"},
    {ElementType::bool_, "bool", 1, "|b1", "BOOL"},
};

const TypeInfo &info(ElementType type) {
  for (const TypeInfo &entry : kTypes)
    if (entry.type == type)
      return entry;
  llvm_unreachable("unknown ElementType");
}

constexpr const char *kNpyDescrList =
    "'<f4', '<f8', '<f2', '<i4', '<i8', '|u1' or '|b1'";
constexpr const char *kSafetensorsDTypeList =
    "F32, F16, BF16, F64, I32, I64, U8 or BOOL";

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

/// An error `<path>: <message>` for malformed or unsupported content.
Error formatError(StringRef path, const Twine &message) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), path + ": " + message);
}

/// An error `<path>: <message>: <reason>` for a failed system call.
Error ioError(StringRef path, const Twine &message, std::error_code ec) {
  return llvm::createStringError(ec,
                                 path + ": " + message + ": " + ec.message());
}

/// `bytes` with everything outside printable ASCII as \xNN and long inputs
/// cut short.
std::string printable(StringRef bytes, size_t limit = 40) {
  std::string out;
  for (char c : bytes.take_front(limit)) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  if (bytes.size() > limit)
    out += "...";
  return out;
}

/// `bytes` in single quotes, made printable.
std::string quote(StringRef bytes, size_t limit = 40) {
  return "'" + printable(bytes, limit) + "'";
}

/// `shape` as "[2, 3]".
std::string formatShape(ArrayRef<int64_t> shape) {
  std::string out = "[";
  for (auto [i, dim] : llvm::enumerate(shape))
    out += (i ? ", " : "") + std::to_string(dim);
  return out + "]";
}

//===----------------------------------------------------------------------===//
// Validation shared by readers and writers
//===----------------------------------------------------------------------===//

/// The byte size of a tensor of `shape` and `type`, or std::nullopt when it
/// overflows int64_t (or the shape has a negative dimension).
std::optional<int64_t> checkedByteSize(ArrayRef<int64_t> shape,
                                       ElementType type) {
  std::optional<int64_t> count = checkedNumElements(shape);
  int64_t bytes;
  if (!count ||
      llvm::MulOverflow(*count, static_cast<int64_t>(sizeOf(type)), bytes))
    return std::nullopt;
  return bytes;
}

/// The index of the first byte of a bool tensor that is neither 0 nor 1.
std::optional<size_t> findInvalidBool(StringRef bytes) {
  for (size_t i = 0; i < bytes.size(); ++i)
    if (static_cast<unsigned char>(bytes[i]) > 1)
      return i;
  return std::nullopt;
}

Error invalidBoolError(StringRef path, const Twine &what, StringRef bytes,
                       size_t index) {
  return formatError(
      path, what + ": invalid bool value at element " + Twine(index) +
                " (expected 0 or 1, found " +
                Twine(unsigned(static_cast<unsigned char>(bytes[index]))) +
                ")");
}

/// Checks that `tensor` is consistent before it is written.
Error checkTensorForWriting(StringRef path, const HostTensor &tensor,
                            const Twine &what) {
  for (int64_t dim : tensor.shape)
    if (dim < 0)
      return formatError(path, what + ": invalid shape " +
                                   formatShape(tensor.shape) +
                                   " (expected non-negative dimensions, "
                                   "found " +
                                   Twine(dim) + ")");
  std::optional<int64_t> size = checkedByteSize(tensor.shape, tensor.type);
  if (!size)
    return formatError(path, what + ": element count of shape " +
                                 formatShape(tensor.shape) +
                                 " overflows int64");
  if (static_cast<uint64_t>(*size) != tensor.bytes.size())
    return formatError(path, what + ": byte size does not match shape " +
                                 formatShape(tensor.shape) + " and type " +
                                 toString(tensor.type) + " (expected " +
                                 Twine(*size) + " bytes, found " +
                                 Twine(tensor.bytes.size()) + ")");
  StringRef bytes(reinterpret_cast<const char *>(tensor.bytes.data()),
                  tensor.bytes.size());
  if (tensor.type == ElementType::bool_)
    if (std::optional<size_t> bad = findInvalidBool(bytes))
      return invalidBoolError(path, what, bytes, *bad);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// File access
//===----------------------------------------------------------------------===//

Expected<std::unique_ptr<llvm::MemoryBuffer>> readFile(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return ioError(path, "cannot read file", buffer.getError());
  return std::move(*buffer);
}

/// Writes all of `data` to `fd`, retrying short writes and EINTR.
std::error_code writeAll(int fd, StringRef data) {
  while (!data.empty()) {
    size_t chunk = std::min<size_t>(data.size(), size_t(1) << 30);
    ssize_t written = ::write(fd, data.data(), chunk);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return std::error_code(errno, std::generic_category());
    }
    data = data.drop_front(static_cast<size_t>(written));
  }
  return {};
}

/// The prefix of the temporary files that atomic writes of `path` use:
/// a hidden sibling, `.<name>.tmp-`, followed by the writer's process id,
/// a dash and random characters. '%' in the name would be taken for a
/// placeholder, so it is replaced.
std::string temporaryPrefix(StringRef path) {
  std::string stem = llvm::sys::path::filename(path).str();
  std::replace(stem.begin(), stem.end(), '%', '_');
  return "." + stem + ".tmp-";
}

/// This machine's name as temporary names carry it: letters, digits, '.'
/// and '_' ('-' separates the fields).
const std::string &hostTag() {
  static const std::string tag = [] {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || !name[0])
      return std::string("host");
    std::string text(name);
    for (char &c : text)
      if (!llvm::isAlnum(c) && c != '.')
        c = '_';
    return text;
  }();
  return tag;
}

/// The model of a temporary file for an atomic write of `path`:
/// `.<name>.tmp-<host>-<pid>-<random>`, so that a later writer can tell
/// the temporaries of dead processes on this machine.
llvm::SmallString<256> temporaryModel(StringRef path) {
  llvm::SmallString<256> model(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(
      model, switchyard::runtime::temporaryPrefix(path, ::getpid()) +
                 "%%%%%%%%");
  return model;
}

/// Where a write of `path` goes, and how. A symbolic link is followed (the
/// link is kept, its target written). A device or a pipe (/dev/null,
/// /dev/stdout to a terminal or a pipe) is written in place: renaming over
/// it would replace it. Regular files and new names are written atomically.
struct WriteTarget {
  std::string path;
  bool inPlace = false;
};
WriteTarget writeTarget(StringRef path) {
  WriteTarget target{path.str(), false};
  llvm::sys::fs::file_status link;
  if (!llvm::sys::fs::status(path, link, /*Follow=*/false) &&
      link.type() == llvm::sys::fs::file_type::symlink_file) {
    llvm::SmallString<256> real;
    // An anonymous pipe (/proc/self/fd/1 -> pipe:[...]) has no path.
    if (llvm::sys::fs::real_path(path, real)) {
      target.inPlace = true;
      return target;
    }
    target.path = std::string(real);
  }
  llvm::sys::fs::file_status status;
  target.inPlace = !llvm::sys::fs::status(target.path, status) &&
                   llvm::sys::fs::exists(status) &&
                   !llvm::sys::fs::is_regular_file(status) &&
                   !llvm::sys::fs::is_directory(status);
  return target;
}

/// Writes the concatenation of `parts` to `path` atomically: into a fresh
/// temporary file in the same directory, which is fsync'ed, closed and
/// renamed over `path`. On failure the temporary is removed and `path` is
/// left as it was. Temporaries that earlier writers of `path` left behind
/// when they died are removed first.
Error writeFileAtomically(StringRef requested, ArrayRef<StringRef> parts) {
  WriteTarget target = writeTarget(requested);
  StringRef path = target.path;
  if (target.inPlace) {
    int fd = ::open(target.path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return ioError(requested, "cannot open it for writing",
                     std::error_code(errno, std::generic_category()));
    for (StringRef part : parts)
      if (std::error_code ec = writeAll(fd, part)) {
        ::close(fd);
        return ioError(requested, "cannot write it", ec);
      }
    if (::close(fd) != 0)
      return ioError(requested, "cannot close it",
                     std::error_code(errno, std::generic_category()));
    return Error::success();
  }
  removeStaleTemporaries(path);
  StringRef directory = llvm::sys::path::parent_path(path);
  llvm::SmallString<256> model = temporaryModel(path);

  int fd = -1;
  llvm::SmallString<256> tempPath;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, tempPath))
    return ioError(path, "cannot create a temporary file next to it", ec);

  auto fail = [&](const Twine &message, std::error_code ec) {
    if (fd >= 0)
      ::close(fd);
    llvm::sys::fs::remove(tempPath);
    return ioError(path, message, ec);
  };
  auto lastError = [] {
    return std::error_code(errno, std::generic_category());
  };

  for (StringRef part : parts)
    if (std::error_code ec = writeAll(fd, part))
      return fail(Twine("cannot write temporary file ") + tempPath, ec);
  if (::fsync(fd) != 0)
    return fail(Twine("cannot flush temporary file ") + tempPath, lastError());
  int closeResult = ::close(fd);
  fd = -1;
  if (closeResult != 0)
    return fail(Twine("cannot close temporary file ") + tempPath, lastError());
  if (std::error_code ec = llvm::sys::fs::rename(tempPath, path))
    return fail(Twine("cannot rename temporary file ") + tempPath + " to it",
                ec);

  // Persist the rename itself. Best effort: the data is complete either way.
  std::string dirPath = directory.empty() ? "." : directory.str();
  int dirFd = ::open(dirPath.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Python literals (npy headers)
//===----------------------------------------------------------------------===//

/// A parsed Python literal; `text` is its source, for messages.
struct PyValue {
  enum class Kind { string, integer, boolean, none, tuple, list, dict, other };
  Kind kind = Kind::other;
  StringRef text;
  std::string string;
  int64_t integer = 0;
  bool boolean = false;
  /// Elements of a tuple or list; alternating keys and values of a dict.
  std::vector<PyValue> items;
};

/// Parses the literals NumPy writes into npy headers: '...' and "..."
/// strings, decimal integers (with Python 2's `L` suffix), True, False,
/// None, tuples, lists and dicts. Other numeric tokens (2.5, 1e3, 0x10)
/// parse as Kind::other, so the caller can say what it found.
class PyLiteralParser {
public:
  explicit PyLiteralParser(StringRef text) : text(text) {}

  /// Parses the whole text as one literal, or returns std::nullopt and
  /// leaves a description in error().
  std::optional<PyValue> parseDocument() {
    std::optional<PyValue> value = parseValue(0);
    if (!value)
      return std::nullopt;
    skipSpace();
    if (pos != text.size())
      return fail("unexpected text after the dict");
    return value;
  }

  const std::string &error() const { return message; }

private:
  static constexpr unsigned kMaxDepth = 32;

  std::nullopt_t fail(const Twine &what) {
    message = (what + " at byte " + Twine(pos) + " of the header (found " +
               (pos < text.size() ? quote(text.substr(pos), 16)
                                  : std::string("end of header")) +
               ")")
                  .str();
    return std::nullopt;
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  static bool isWordChar(char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.';
  }

  std::optional<PyValue> parseValue(unsigned depth) {
    skipSpace();
    if (depth > kMaxDepth)
      return fail("literal nested too deeply");
    if (pos == text.size())
      return fail("expected a value");
    size_t start = pos;
    char c = text[pos];
    std::optional<PyValue> value;
    if (c == '\'' || c == '"')
      value = parseString();
    else if (c == '(')
      value = parseSequence(depth, ')');
    else if (c == '[')
      value = parseSequence(depth, ']');
    else if (c == '{')
      value = parseDict(depth);
    else if (llvm::isDigit(c) || c == '-' || c == '+')
      value = parseNumber();
    else if (llvm::isAlpha(c) || c == '_')
      value = parseName();
    else
      return fail("expected a value");
    if (value && value->text.empty())
      value->text = text.slice(start, pos);
    return value;
  }

  std::optional<PyValue> parseString() {
    char quoteChar = text[pos++];
    PyValue value;
    value.kind = PyValue::Kind::string;
    while (true) {
      if (pos == text.size() || text[pos] == '\n')
        return fail("unterminated string");
      char c = text[pos++];
      if (c == quoteChar)
        return value;
      if (c == '\\' && pos < text.size() &&
          (text[pos] == '\\' || text[pos] == '\'' || text[pos] == '"'))
        c = text[pos++];
      value.string += c;
    }
  }

  std::optional<PyValue> parseNumber() {
    size_t start = pos;
    if (text[pos] == '-' || text[pos] == '+')
      ++pos;
    while (pos < text.size() &&
           (isWordChar(text[pos]) ||
            ((text[pos] == '-' || text[pos] == '+') &&
             (text[pos - 1] == 'e' || text[pos - 1] == 'E'))))
      ++pos;
    StringRef token = text.slice(start, pos);
    StringRef digits = token;
    bool negative = digits.consume_front("-");
    if (!negative)
      digits.consume_front("+");
    if (digits.empty())
      return fail("expected a number");
    // Python 2 wrote long integers with an L suffix: (3L, 4L).
    if (digits.size() > 1 && (digits.back() == 'L' || digits.back() == 'l'))
      digits = digits.drop_back();
    PyValue value;
    value.text = token;
    uint64_t magnitude;
    if (llvm::all_of(digits, llvm::isDigit) &&
        !digits.getAsInteger(10, magnitude) &&
        magnitude <=
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      value.kind = PyValue::Kind::integer;
      value.integer = negative ? -static_cast<int64_t>(magnitude)
                               : static_cast<int64_t>(magnitude);
    }
    return value;
  }

  std::optional<PyValue> parseName() {
    size_t start = pos;
    while (pos < text.size() && (llvm::isAlnum(text[pos]) || text[pos] == '_'))
      ++pos;
    StringRef name = text.slice(start, pos);
    PyValue value;
    if (name == "True" || name == "False") {
      value.kind = PyValue::Kind::boolean;
      value.boolean = name == "True";
    } else if (name == "None") {
      value.kind = PyValue::Kind::none;
    } else {
      pos = start;
      return fail("unexpected name");
    }
    return value;
  }

  /// A tuple or list. `(x)` is x itself, as in Python; `(x,)` is a tuple.
  std::optional<PyValue> parseSequence(unsigned depth, char close) {
    ++pos;
    PyValue value;
    value.kind = close == ')' ? PyValue::Kind::tuple : PyValue::Kind::list;
    bool sawComma = false;
    skipSpace();
    while (pos < text.size() && text[pos] != close) {
      std::optional<PyValue> item = parseValue(depth + 1);
      if (!item)
        return std::nullopt;
      value.items.push_back(std::move(*item));
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        sawComma = true;
        ++pos;
        skipSpace();
      } else if (pos == text.size() || text[pos] != close) {
        return fail(Twine("expected ',' or '") + Twine(close) + "'");
      }
    }
    if (pos == text.size())
      return fail(Twine("expected '") + Twine(close) + "'");
    ++pos;
    if (close == ')' && value.items.size() == 1 && !sawComma)
      return std::move(value.items.front());
    return value;
  }

  std::optional<PyValue> parseDict(unsigned depth) {
    ++pos;
    PyValue value;
    value.kind = PyValue::Kind::dict;
    skipSpace();
    while (pos < text.size() && text[pos] != '}') {
      std::optional<PyValue> key = parseValue(depth + 1);
      if (!key)
        return std::nullopt;
      skipSpace();
      if (pos == text.size() || text[pos] != ':')
        return fail("expected ':'");
      ++pos;
      std::optional<PyValue> item = parseValue(depth + 1);
      if (!item)
        return std::nullopt;
      value.items.push_back(std::move(*key));
      value.items.push_back(std::move(*item));
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        skipSpace();
      } else if (pos == text.size() || text[pos] != '}') {
        return fail("expected ',' or '}'");
      }
    }
    if (pos == text.size())
      return fail("expected '}'");
    ++pos;
    return value;
  }

  StringRef text;
  size_t pos = 0;
  std::string message;
};

//===----------------------------------------------------------------------===//
// npy
//===----------------------------------------------------------------------===//

constexpr StringRef kNpyMagic("\x93NUMPY", 6);
/// Headers beyond this are refused (NumPy's own default limit is 10000).
constexpr uint64_t kMaxNpyHeaderSize = 1 << 20;
/// NumPy leaves room for the growth axis to reach this many digits.
constexpr size_t kGrowthAxisMaxDigits = 21;

/// The element type of npy dtype descr `descr`.
Expected<ElementType> parseNpyDescr(StringRef path, const PyValue &descr) {
  if (descr.kind != PyValue::Kind::string)
    return formatError(path, "unsupported dtype descr " +
                                 printable(descr.text) + " (expected one of " +
                                 kNpyDescrList +
                                 ", found a structured or subarray dtype)");
  StringRef text = descr.string;
  auto unsupported = [&] {
    return formatError(path, "unsupported dtype descr " + quote(text) +
                                 " (expected one of " + kNpyDescrList + ")");
  };
  if (text.size() < 2)
    return unsupported();
  char order = text.front();
  StringRef code = text.drop_front();
  for (const TypeInfo &entry : kTypes) {
    if (!entry.npyDescr || code != StringRef(entry.npyDescr).drop_front())
      continue;
    // Byte order is irrelevant to single bytes; NumPy writes '|'.
    if (entry.size == 1 && StringRef("|<>=").contains(order))
      return entry.type;
    if (order == '<')
      return entry.type;
    if (order == '>')
      return formatError(path, "big-endian dtype descr " + quote(text) +
                                   " is not supported (expected " +
                                   quote(entry.npyDescr) + ")");
    return formatError(path, "unsupported byte order in dtype descr " +
                                 quote(text) + " (expected " +
                                 quote(entry.npyDescr) + ")");
  }
  return unsupported();
}

/// Reorders the elements of a column-major array into row-major order.
std::vector<uint8_t> fortranToRowMajor(StringRef data, ArrayRef<int64_t> shape,
                                       size_t elementSize, int64_t count) {
  std::vector<uint8_t> out(data.size());
  size_t rank = shape.size();
  if (rank <= 1 || count == 0) {
    llvm::copy(data, out.begin());
    return out;
  }
  // Column-major strides, in elements.
  std::vector<int64_t> strides(rank, 1);
  for (size_t k = 1; k < rank; ++k)
    strides[k] = strides[k - 1] * shape[k - 1];
  // Walk the row-major index (last dimension fastest), tracking the
  // column-major offset of the same element.
  std::vector<int64_t> index(rank, 0);
  int64_t source = 0;
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(out.data() + i * elementSize,
                data.data() + source * elementSize, elementSize);
    for (size_t k = rank; k-- > 0;) {
      if (++index[k] < shape[k]) {
        source += strides[k];
        break;
      }
      source -= strides[k] * (shape[k] - 1);
      index[k] = 0;
    }
  }
  return out;
}

/// The npy header dict for `tensor`, as numpy.save writes it (before the
/// alignment padding).
std::string npyHeaderDict(const HostTensor &tensor) {
  std::string header = "{'descr': '";
  header += info(tensor.type).npyDescr;
  header += "', 'fortran_order': False, 'shape': (";
  for (auto [i, dim] : llvm::enumerate(tensor.shape))
    header += (i ? ", " : "") + std::to_string(dim);
  header += tensor.shape.size() == 1 ? ",), }" : "), }";
  // Room for the first dimension to grow in place (NumPy >= 1.24).
  if (!tensor.shape.empty())
    header.append(kGrowthAxisMaxDigits -
                      std::to_string(tensor.shape.front()).size(),
                  ' ');
  return header;
}

//===----------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------===//

constexpr uint64_t kMaxSafetensorsHeaderSize = 100'000'000;
constexpr unsigned kMaxJsonDepth = 64;
constexpr StringRef kMetadataKey = "__metadata__";

/// Skips the JSON string starting at text[pos] == '"'; returns the index
/// just past its closing quote, or text.size() if it is unterminated.
size_t skipJsonString(StringRef text, size_t pos) {
  for (++pos; pos < text.size(); ++pos) {
    if (text[pos] == '\\')
      ++pos;
    else if (text[pos] == '"')
      return pos + 1;
  }
  return text.size();
}

/// Checks, before parsing, that `text` nests arrays and objects at most
/// kMaxJsonDepth deep: llvm::json parses recursively.
bool jsonDepthIsBounded(StringRef text) {
  unsigned depth = 0;
  for (size_t pos = 0; pos < text.size();) {
    char c = text[pos];
    if (c == '"') {
      pos = skipJsonString(text, pos);
      continue;
    }
    if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth)
        return false;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
    ++pos;
  }
  return true;
}

/// Rejects duplicate keys in any object of the (valid) JSON `text`.
Error checkDuplicateJsonKeys(StringRef path, StringRef text) {
  // One entry an open bracket: the keys seen so far for an object,
  // std::nullopt for an array.
  std::vector<std::optional<llvm::StringSet<>>> open;
  for (size_t pos = 0; pos < text.size();) {
    char c = text[pos];
    if (c == '{') {
      open.emplace_back(llvm::StringSet<>());
    } else if (c == '[') {
      open.emplace_back(std::nullopt);
    } else if ((c == '}' || c == ']') && !open.empty()) {
      open.pop_back();
    } else if (c == '"') {
      size_t end = skipJsonString(text, pos);
      StringRef token = text.slice(pos, end);
      pos = end;
      while (pos < text.size() && llvm::isSpace(text[pos]))
        ++pos;
      bool isKey = pos < text.size() && text[pos] == ':' && !open.empty() &&
                   open.back().has_value();
      if (!isKey)
        continue;
      // Decode escapes the way the parser did.
      Expected<llvm::json::Value> key = llvm::json::parse(token);
      if (!key) {
        llvm::consumeError(key.takeError());
        continue;
      }
      std::string name = key->getAsString().value_or("").str();
      if (!open.back()->insert(name).second)
        return formatError(path, (open.size() == 1 ? "duplicate tensor name "
                                                   : "duplicate JSON key ") +
                                     quote(name, 80) + " in the header");
      continue;
    }
    ++pos;
  }
  return Error::success();
}

StringRef jsonKindName(const llvm::json::Value &value) {
  switch (value.kind()) {
  case llvm::json::Value::Null:
    return "null";
  case llvm::json::Value::Boolean:
    return "a boolean";
  case llvm::json::Value::Number:
    return "a number";
  case llvm::json::Value::String:
    return "a string";
  case llvm::json::Value::Array:
    return "an array";
  case llvm::json::Value::Object:
    return "an object";
  }
  return "?";
}

std::string jsonText(const llvm::json::Value &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  return text.size() > 60 ? text.substr(0, 60) + "..." : text;
}

/// A non-negative integer JSON value.
std::optional<int64_t> getNonNegative(const llvm::json::Value &value) {
  std::optional<int64_t> integer = value.getAsInteger();
  if (!integer || *integer < 0)
    return std::nullopt;
  return integer;
}

/// One safetensors header entry, validated on its own.
struct SafetensorsEntry {
  std::string name;
  ElementType type;
  std::vector<int64_t> shape;
  int64_t begin, end;
};

Expected<SafetensorsEntry> parseEntry(StringRef path, StringRef name,
                                      const llvm::json::Value &value) {
  std::string what = "tensor " + quote(name, 80);
  const llvm::json::Object *object = value.getAsObject();
  if (!object)
    return formatError(path, what +
                                 ": entry is not an object (expected "
                                 "{\"dtype\", \"shape\", "
                                 "\"data_offsets\"}, found " +
                                 jsonKindName(value) + ")");
  for (const auto &field : *object) {
    StringRef key = field.first;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return formatError(path, what + ": unexpected key " + quote(key) +
                                   " (expected \"dtype\", \"shape\" and "
                                   "\"data_offsets\")");
  }
  for (StringRef key : {"dtype", "shape", "data_offsets"})
    if (!object->get(key))
      return formatError(path, what + ": missing key \"" + key + "\"");

  SafetensorsEntry entry;
  entry.name = name.str();
  std::optional<StringRef> dtype = object->getString("dtype");
  const TypeInfo *type = nullptr;
  for (const TypeInfo &candidate : kTypes)
    if (dtype && *dtype == candidate.safetensorsName)
      type = &candidate;
  if (!type)
    return formatError(
        path, what + ": unsupported dtype " + jsonText(*object->get("dtype")) +
                  " (expected one of " + kSafetensorsDTypeList + ")");
  entry.type = type->type;

  const llvm::json::Array *shape = object->getArray("shape");
  if (!shape)
    return formatError(path, what +
                                 ": invalid shape (expected an array of "
                                 "non-negative integers, found " +
                                 jsonText(*object->get("shape")) + ")");
  for (const llvm::json::Value &dim : *shape) {
    std::optional<int64_t> size = getNonNegative(dim);
    if (!size)
      return formatError(path, what +
                                   ": invalid shape entry (expected a "
                                   "non-negative integer, found " +
                                   jsonText(dim) + ")");
    entry.shape.push_back(*size);
  }
  std::optional<int64_t> byteSize = checkedByteSize(entry.shape, entry.type);
  if (!byteSize)
    return formatError(path, what + ": element count of shape " +
                                 formatShape(entry.shape) + " overflows int64");

  const llvm::json::Array *offsets = object->getArray("data_offsets");
  std::optional<int64_t> begin, end;
  if (offsets && offsets->size() == 2) {
    begin = getNonNegative((*offsets)[0]);
    end = getNonNegative((*offsets)[1]);
  }
  if (!begin || !end)
    return formatError(path, what +
                                 ": invalid data_offsets (expected [begin, "
                                 "end] with non-negative integers, found " +
                                 jsonText(*object->get("data_offsets")) + ")");
  if (*begin > *end)
    return formatError(path, what + ": data_offsets [" + Twine(*begin) + ", " +
                                 Twine(*end) +
                                 "] are reversed (expected begin <= end)");
  if (*end - *begin != *byteSize)
    return formatError(path, what + ": data_offsets [" + Twine(*begin) + ", " +
                                 Twine(*end) + "] do not match shape " +
                                 formatShape(entry.shape) + " and dtype " +
                                 type->safetensorsName + " (expected " +
                                 Twine(*byteSize) + " bytes, found " +
                                 Twine(*end - *begin) + ")");
  entry.begin = *begin;
  entry.end = *end;
  return entry;
}

Error parseMetadata(StringRef path, const llvm::json::Value &value,
                    TensorMetadata &metadata) {
  const llvm::json::Object *object = value.getAsObject();
  if (!object)
    return formatError(path, "\"__metadata__\" is not an object (expected a "
                             "map from strings to strings, found " +
                                 Twine(jsonKindName(value)) + ")");
  for (const auto &[key, item] : *object) {
    std::optional<StringRef> string = item.getAsString();
    if (!string)
      return formatError(path, "\"__metadata__\" entry " + quote(key.str()) +
                                   " is not a string (expected a map from "
                                   "strings to strings, found " +
                                   jsonKindName(item) + ")");
    metadata[key.str()] = string->str();
  }
  return Error::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

std::string_view switchyard::runtime::toString(ElementType type) {
  return info(type).name;
}

size_t switchyard::runtime::sizeOf(ElementType type) { return info(type).size; }

std::optional<DType> switchyard::runtime::toDType(ElementType type) {
  switch (type) {
  case ElementType::f32:
    return DType::f32;
  case ElementType::f16:
    return DType::f16;
  case ElementType::bf16:
    return DType::bf16;
  default:
    return std::nullopt;
  }
}

ElementType switchyard::runtime::toElementType(DType type) {
  switch (type) {
  case DType::f32:
    return ElementType::f32;
  case DType::f16:
    return ElementType::f16;
  case DType::bf16:
    return ElementType::bf16;
  }
  llvm_unreachable("unknown DType");
}

std::optional<int64_t>
switchyard::runtime::checkedNumElements(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    if (dim < 0 || llvm::MulOverflow(count, dim, count))
      return std::nullopt;
  return count;
}

int64_t HostTensor::numElements() const {
  return checkedNumElements(shape).value_or(-1);
}

Expected<HostTensor> switchyard::runtime::readNpy(StringRef path) {
  auto buffer = readFile(path);
  if (!buffer)
    return buffer.takeError();
  StringRef file = (*buffer)->getBuffer();

  // Magic string and version.
  StringRef magic = file.take_front(kNpyMagic.size());
  if (!kNpyMagic.starts_with(magic))
    return formatError(path, "not an npy file: bad magic (expected " +
                                 quote(kNpyMagic) + ", found " + quote(magic) +
                                 ")");
  if (file.size() < 8)
    return formatError(path, "truncated file (expected at least 8 bytes of "
                             "magic and version, found " +
                                 Twine(file.size()) + ")");
  unsigned major = static_cast<unsigned char>(file[6]);
  unsigned minor = static_cast<unsigned char>(file[7]);
  if (minor != 0 || major < 1 || major > 3)
    return formatError(path, "unsupported npy format version " + Twine(major) +
                                 "." + Twine(minor) +
                                 " (expected 1.0, 2.0 or 3.0)");

  // Header.
  size_t lengthSize = major == 1 ? 2 : 4;
  if (file.size() < 8 + lengthSize)
    return formatError(path, "truncated file (expected a " + Twine(lengthSize) +
                                 "-byte header length, found " +
                                 Twine(file.size() - 8) + " bytes)");
  uint64_t headerSize = major == 1
                            ? llvm::support::endian::read16le(file.data() + 8)
                            : llvm::support::endian::read32le(file.data() + 8);
  StringRef rest = file.drop_front(8 + lengthSize);
  if (headerSize > rest.size())
    return formatError(path, "truncated header (expected " + Twine(headerSize) +
                                 " bytes, found " + Twine(rest.size()) + ")");
  if (headerSize > kMaxNpyHeaderSize)
    return formatError(path, "header too large (expected at most " +
                                 Twine(kMaxNpyHeaderSize) + " bytes, found " +
                                 Twine(headerSize) + ")");
  StringRef headerText = rest.take_front(headerSize);
  StringRef payload = rest.drop_front(headerSize);

  PyLiteralParser parser(headerText);
  std::optional<PyValue> header = parser.parseDocument();
  if (!header)
    return formatError(path, "malformed npy header: " + parser.error());
  if (header->kind != PyValue::Kind::dict)
    return formatError(path, "malformed npy header: not a dict (expected "
                             "{'descr': ..., 'fortran_order': ..., "
                             "'shape': ...}, found " +
                                 printable(header->text) + ")");
  const PyValue *descr = nullptr, *fortranOrder = nullptr, *shape = nullptr;
  for (size_t i = 0; i < header->items.size(); i += 2) {
    const PyValue &key = header->items[i];
    const PyValue *value = &header->items[i + 1];
    const PyValue **slot = nullptr;
    if (key.kind == PyValue::Kind::string && key.string == "descr")
      slot = &descr;
    else if (key.kind == PyValue::Kind::string && key.string == "fortran_order")
      slot = &fortranOrder;
    else if (key.kind == PyValue::Kind::string && key.string == "shape")
      slot = &shape;
    if (!slot)
      return formatError(path, "malformed npy header: unexpected key " +
                                   printable(key.text) +
                                   " (expected 'descr', 'fortran_order' "
                                   "and 'shape')");
    if (*slot)
      return formatError(path, "malformed npy header: duplicate key " +
                                   printable(key.text));
    *slot = value;
  }
  const std::pair<const PyValue *, const char *> required[] = {
      {descr, "descr"}, {fortranOrder, "fortran_order"}, {shape, "shape"}};
  for (auto [value, name] : required)
    if (!value)
      return formatError(path, Twine("malformed npy header: missing key '") +
                                   name + "'");

  HostTensor tensor;
  Expected<ElementType> type = parseNpyDescr(path, *descr);
  if (!type)
    return type.takeError();
  tensor.type = *type;

  if (fortranOrder->kind != PyValue::Kind::boolean)
    return formatError(path, "malformed npy header: invalid fortran_order "
                             "(expected True or False, found " +
                                 printable(fortranOrder->text) + ")");

  if (shape->kind != PyValue::Kind::tuple)
    return formatError(path, "invalid shape (expected a tuple of "
                             "non-negative integers, found " +
                                 printable(shape->text) + ")");
  for (const PyValue &dim : shape->items) {
    if (dim.kind != PyValue::Kind::integer || dim.integer < 0)
      return formatError(path, "invalid shape entry (expected a non-negative "
                               "integer, found " +
                                   printable(dim.text) + ")");
    tensor.shape.push_back(dim.integer);
  }
  std::optional<int64_t> byteSize = checkedByteSize(tensor.shape, *type);
  if (!byteSize)
    return formatError(path, "element count of shape " +
                                 formatShape(tensor.shape) +
                                 " overflows int64");

  // Data.
  if (payload.size() < static_cast<uint64_t>(*byteSize))
    return formatError(path, "truncated data (expected " + Twine(*byteSize) +
                                 " bytes for shape " +
                                 formatShape(tensor.shape) + " and dtype " +
                                 quote(descr->string) + ", found " +
                                 Twine(payload.size()) + ")");
  if (payload.size() > static_cast<uint64_t>(*byteSize))
    return formatError(path, "trailing bytes after the data (expected " +
                                 Twine(*byteSize) + " bytes for shape " +
                                 formatShape(tensor.shape) + ", found " +
                                 Twine(payload.size()) + ")");
  if (tensor.type == ElementType::bool_)
    if (std::optional<size_t> bad = findInvalidBool(payload))
      return invalidBoolError(path, "data", payload, *bad);
  if (fortranOrder->boolean)
    tensor.bytes = fortranToRowMajor(payload, tensor.shape, sizeOf(*type),
                                     tensor.numElements());
  else
    tensor.bytes.assign(payload.bytes_begin(), payload.bytes_end());
  return tensor;
}

Error switchyard::runtime::writeNpy(StringRef path, const HostTensor &tensor) {
  if (Error error = checkTensorForWriting(path, tensor, "cannot write tensor"))
    return error;
  if (!info(tensor.type).npyDescr)
    return formatError(path, Twine("cannot write tensor: NumPy has no dtype "
                                   "for ") +
                                 toString(tensor.type) +
                                 " (expected f32, f16, f64, i32, i64, u8 or "
                                 "bool; write bf16 to safetensors)");

  // Exactly numpy.lib.format._wrap_header: magic, version, header length,
  // then the dict padded with spaces and a final newline so that the data
  // starts on a 64-byte boundary. Version 2.0 only when 1.0 cannot say the
  // header's length.
  std::string dict = npyHeaderDict(tensor);
  std::string prefix;
  for (unsigned major : {1u, 2u}) {
    size_t lengthSize = major == 1 ? 2 : 4;
    size_t unpadded = kNpyMagic.size() + 2 + lengthSize + dict.size() + 1;
    size_t headerSize = dict.size() + 1 + (64 - unpadded % 64);
    if (major == 1 && headerSize > std::numeric_limits<uint16_t>::max())
      continue;
    if (headerSize > std::numeric_limits<uint32_t>::max())
      break;
    prefix = kNpyMagic.str();
    prefix += static_cast<char>(major);
    prefix += '\0';
    char length[4];
    llvm::support::endian::write32le(length, headerSize);
    prefix.append(length, lengthSize);
    prefix += dict;
    prefix.append(headerSize - dict.size() - 1, ' ');
    prefix += '\n';
    break;
  }
  if (prefix.empty())
    return formatError(path, "cannot write tensor: npy header too large for "
                             "rank " +
                                 Twine(tensor.shape.size()));

  StringRef data(reinterpret_cast<const char *>(tensor.bytes.data()),
                 tensor.bytes.size());
  return writeFileAtomically(path, {StringRef(prefix), data});
}

Expected<std::vector<HostTensor>>
switchyard::runtime::readSafetensors(StringRef path, TensorMetadata *metadata) {
  auto buffer = readFile(path);
  if (!buffer)
    return buffer.takeError();
  StringRef file = (*buffer)->getBuffer();

  // Header length and header.
  if (file.size() < 8)
    return formatError(path, "truncated file (expected an 8-byte header "
                             "length, found " +
                                 Twine(file.size()) + " bytes)");
  uint64_t headerSize = llvm::support::endian::read64le(file.data());
  if (headerSize > kMaxSafetensorsHeaderSize)
    return formatError(path, "header length is absurd (expected at most " +
                                 Twine(kMaxSafetensorsHeaderSize) +
                                 " bytes, found " + Twine(headerSize) + ")");
  StringRef rest = file.drop_front(8);
  if (headerSize > rest.size())
    return formatError(path, "truncated header (header length says " +
                                 Twine(headerSize) + " bytes, found " +
                                 Twine(rest.size()) + ")");
  StringRef headerText = rest.take_front(headerSize);
  StringRef data = rest.drop_front(headerSize);

  if (!jsonDepthIsBounded(headerText))
    return formatError(path, "invalid JSON header: nested more than " +
                                 Twine(kMaxJsonDepth) + " levels deep");
  Expected<llvm::json::Value> header = llvm::json::parse(headerText);
  if (!header)
    return formatError(path, "invalid JSON header: " +
                                 llvm::toString(header.takeError()));
  const llvm::json::Object *object = header->getAsObject();
  if (!object)
    return formatError(path, "header is not a JSON object (expected {...}, "
                             "found " +
                                 Twine(jsonKindName(*header)) + ")");
  if (Error error = checkDuplicateJsonKeys(path, headerText))
    return std::move(error);

  // Entries, validated in name order so that errors are deterministic.
  std::vector<StringRef> names;
  for (const auto &field : *object)
    names.push_back(field.first);
  llvm::sort(names);
  TensorMetadata fileMetadata;
  std::vector<SafetensorsEntry> entries;
  for (StringRef name : names) {
    const llvm::json::Value &value = *object->get(name);
    if (name == kMetadataKey) {
      if (Error error = parseMetadata(path, value, fileMetadata))
        return std::move(error);
      continue;
    }
    Expected<SafetensorsEntry> entry = parseEntry(path, name, value);
    if (!entry)
      return entry.takeError();
    if (static_cast<uint64_t>(entry->end) > data.size())
      return formatError(
          path, "tensor " + quote(name, 80) + ": data_offsets [" +
                    Twine(entry->begin) + ", " + Twine(entry->end) +
                    "] out of range (expected end <= " + Twine(data.size()) +
                    ", the size of the data buffer; file "
                    "truncated?)");
    entries.push_back(std::move(*entry));
  }

  // The tensors must tile the data buffer: no overlap, no gap.
  llvm::sort(entries, [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  int64_t expectedBegin = 0;
  const SafetensorsEntry *previous = nullptr;
  for (const SafetensorsEntry &entry : entries) {
    if (entry.begin != expectedBegin) {
      std::string where = previous
                              ? "after tensor " + quote(previous->name, 80)
                              : std::string("at the start of the data buffer");
      return formatError(path, Twine(entry.begin < expectedBegin
                                         ? "overlapping tensors: tensor "
                                         : "gap in the data buffer: tensor ") +
                                   quote(entry.name, 80) + " " + where +
                                   " (expected it to begin at " +
                                   Twine(expectedBegin) + ", found " +
                                   Twine(entry.begin) + ")");
    }
    expectedBegin = entry.end;
    previous = &entry;
  }
  if (static_cast<uint64_t>(expectedBegin) != data.size())
    return formatError(path, "unused bytes at the end of the data buffer "
                             "(expected " +
                                 Twine(expectedBegin) + " bytes, found " +
                                 Twine(data.size()) + ")");

  std::vector<HostTensor> tensors;
  tensors.reserve(entries.size());
  for (SafetensorsEntry &entry : entries) {
    StringRef bytes = data.slice(entry.begin, entry.end);
    if (entry.type == ElementType::bool_)
      if (std::optional<size_t> bad = findInvalidBool(bytes))
        return invalidBoolError(path, "tensor " + quote(entry.name, 80), bytes,
                                *bad);
    tensors.push_back(
        {std::move(entry.name), entry.type, std::move(entry.shape),
         std::vector<uint8_t>(bytes.bytes_begin(), bytes.bytes_end())});
  }
  if (metadata)
    *metadata = std::move(fileMetadata);
  return tensors;
}

Error switchyard::runtime::writeSafetensors(StringRef path,
                                            ArrayRef<HostTensor> tensors,
                                            const TensorMetadata &metadata) {
  llvm::StringSet<> names;
  for (const HostTensor &tensor : tensors) {
    std::string what = "cannot write tensor " + quote(tensor.name, 80);
    if (!llvm::json::isUTF8(tensor.name))
      return formatError(path, what + ": name is not valid UTF-8");
    if (tensor.name == kMetadataKey)
      return formatError(path, what + ": the name is reserved for metadata");
    if (!names.insert(tensor.name).second)
      return formatError(path, "cannot write tensors: duplicate tensor name " +
                                   quote(tensor.name, 80));
    if (Error error = checkTensorForWriting(path, tensor, what))
      return error;
  }
  for (const auto &[key, value] : metadata)
    if (!llvm::json::isUTF8(key) || !llvm::json::isUTF8(value))
      return formatError(path, "cannot write metadata entry " + quote(key) +
                                   ": not valid UTF-8");

  std::string header;
  {
    llvm::raw_string_ostream os(header);
    llvm::json::OStream json(os);
    int64_t offset = 0;
    json.object([&] {
      if (!metadata.empty())
        json.attributeObject(kMetadataKey, [&] {
          for (const auto &[key, value] : metadata)
            json.attribute(key, value);
        });
      for (const HostTensor &tensor : tensors) {
        json.attributeObject(tensor.name, [&] {
          json.attribute("dtype", info(tensor.type).safetensorsName);
          json.attributeArray("shape", [&] {
            for (int64_t dim : tensor.shape)
              json.value(dim);
          });
          json.attributeArray("data_offsets", [&] {
            json.value(offset);
            offset += static_cast<int64_t>(tensor.bytes.size());
            json.value(offset);
          });
        });
      }
    });
  }
  // Pad with spaces so that the data buffer starts 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxSafetensorsHeaderSize)
    return formatError(path, "cannot write tensors: header too large "
                             "(expected at most " +
                                 Twine(kMaxSafetensorsHeaderSize) +
                                 " bytes, found " + Twine(header.size()) + ")");

  char length[8];
  llvm::support::endian::write64le(length, header.size());
  std::vector<StringRef> parts = {StringRef(length, 8), header};
  for (const HostTensor &tensor : tensors)
    parts.emplace_back(reinterpret_cast<const char *>(tensor.bytes.data()),
                       tensor.bytes.size());
  return writeFileAtomically(path, parts);
}

size_t switchyard::runtime::removeStaleTemporaries(StringRef path) {
  StringRef directory = llvm::sys::path::parent_path(path);
  std::string prefix = ::temporaryPrefix(path);
  std::error_code ec;
  size_t removed = 0;
  auto now = std::chrono::system_clock::now();
  for (llvm::sys::fs::directory_iterator it(directory.empty() ? "." : directory,
                                            ec),
       end;
       !ec && it != end; it.increment(ec)) {
    StringRef name = llvm::sys::path::filename(it->path());
    if (!name.consume_front(prefix))
      continue;
    // `<host>-<pid>-<random>`: stale when that process of this machine is
    // gone. Other machines' (a shared file system) and names without a
    // writer (earlier versions) are stale when an hour old: a writer in
    // progress keeps its file's time current.
    llvm::SmallVector<StringRef, 3> fields;
    name.split(fields, '-');
    int pid = 0;
    bool stale;
    if (fields.size() == 3 && fields[0] == hostTag() &&
        !fields[1].getAsInteger(10, pid) && pid > 0) {
      stale = ::kill(pid, 0) != 0 && errno == ESRCH;
    } else {
      llvm::sys::fs::file_status status;
      stale = !llvm::sys::fs::status(it->path(), status) &&
              now - status.getLastModificationTime() > std::chrono::hours(1);
    }
    if (stale && !llvm::sys::fs::remove(it->path()))
      ++removed;
  }
  return removed;
}

Error switchyard::runtime::checkWritable(StringRef path) {
  if (path.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "an empty output path");
  if (llvm::sys::fs::is_directory(path))
    return llvm::createStringError(
        std::make_error_code(std::errc::is_a_directory),
        path + ": cannot write the file: it is a directory");
  // A device or a pipe is written in place (writeFileAtomically).
  WriteTarget target = writeTarget(path);
  if (target.inPlace) {
    if (::access(target.path.c_str(), W_OK) != 0)
      return ioError(path, "cannot write it",
                     std::error_code(errno, std::generic_category()));
    return Error::success();
  }
  StringRef directory = llvm::sys::path::parent_path(target.path);
  std::string dir = directory.empty() ? "." : directory.str();
  if (!llvm::sys::fs::is_directory(dir))
    return llvm::createStringError(
        std::make_error_code(std::errc::no_such_file_or_directory),
        path + ": cannot write the file: directory '" + dir +
            "' does not exist");
  // Creating a file is the test that holds for every user, root included,
  // and every file system (read-only mounts, /proc).
  int fd = -1;
  llvm::SmallString<256> probe;
  llvm::SmallString<256> model = temporaryModel(target.path);
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, probe))
    return ioError(path,
                   "cannot write the file: cannot create a file in '" + dir +
                       "'",
                   ec);
  ::close(fd);
  llvm::sys::fs::remove(probe);
  return Error::success();
}

Error switchyard::runtime::writeTextFile(StringRef path, StringRef text) {
  return writeFileAtomically(path, {text});
}

std::string switchyard::runtime::temporaryPrefix(StringRef path, int pid) {
  return ::temporaryPrefix(path) + hostTag() + "-" + std::to_string(pid) +
         "-";
}

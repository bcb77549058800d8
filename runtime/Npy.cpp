//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
//
// Reads and writes NumPy's `.npy` files: the magic and version, the header
// (a Python dict literal, read by a small recursive-descent parser for the
// subset of Python literals NumPy writes: strings, integers, booleans,
// tuples, lists, dicts), the dtype descr, and the data, transposed into
// row-major order when the file stores it in Fortran order. Every size is
// checked against the file's length before the data is touched. Writing
// produces byte for byte what numpy.save writes.
//
//===----------------------------------------------------------------------===//

#include "runtime/TensorFile.h"
#include "runtime/TensorFileInternal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"

#include <cstring>
#include <limits>

using namespace switchyard::runtime;
using namespace switchyard::runtime::tensorfile;
using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace {

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
constexpr const char *kNpyDescrList =
    "'<f4', '<f8', '<f2', '<i4', '<i8', '|u1' or '|b1'";

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
TensorBytes fortranToRowMajor(StringRef data, ArrayRef<int64_t> shape,
                              size_t elementSize, int64_t count) {
  TensorBytes out(data.size());
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

} // namespace

//===----------------------------------------------------------------------===//
// Reading and writing
//===----------------------------------------------------------------------===//

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

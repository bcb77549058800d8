//===- Safetensors.cpp - safetensors files --------------------------------===//
//
// Reads and writes Hugging Face's safetensors files: an 8-byte header
// length, a JSON header naming every tensor's dtype, shape and byte range
// (and an optional string-to-string "__metadata__"), and the data buffer
// the tensors tile exactly. The header is read with llvm::json after a
// lexical pre-pass that bounds its nesting depth and rejects duplicate
// keys, which llvm::json would silently merge; every range is checked
// against the file's length before the data is touched.
//
//===----------------------------------------------------------------------===//

#include "runtime/TensorFile.h"
#include "runtime/TensorFileInternal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <tuple>

using namespace switchyard::runtime;
using namespace switchyard::runtime::tensorfile;
using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

namespace {

constexpr uint64_t kMaxSafetensorsHeaderSize = 100'000'000;
constexpr unsigned kMaxJsonDepth = 64;
constexpr StringRef kMetadataKey = "__metadata__";
constexpr const char *kSafetensorsDTypeList =
    "F32, F16, BF16, F64, I32, I64, U8 or BOOL";

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
// Reading and writing
//===----------------------------------------------------------------------===//

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
         TensorBytes(bytes.bytes_begin(), bytes.bytes_end())});
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

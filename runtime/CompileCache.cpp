//===- CompileCache.cpp - compiled programs kept between runs -------------===//
//
// An entry is one file, `<key>.syc`:
//
//   switchyard-compile-cache 3 <metadata bytes> <object bytes> <checksum>\n
//   <metadata: JSON of the functions, parameters, backend, the objects'
//              constructors and destructors, and each object's size>
//   <objects, one after the other>
//
// the checksum being the xxh3 128-bit hash of the metadata and the
// objects, in hexadecimal. Anything else is a miss.
//
//===----------------------------------------------------------------------===//

#include "runtime/CompileCache.h"
#include "runtime/TensorFileInternal.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/xxhash.h"

#include <cstdlib>

using namespace switchyard::runtime;
namespace json = llvm::json;

namespace {

constexpr llvm::StringLiteral kMagic = "switchyard-compile-cache 3";

std::string checksum(llvm::StringRef metadata, llvm::StringRef object) {
  llvm::XXH128_hash_t hash =
      llvm::xxh3_128bits(llvm::arrayRefFromStringRef(metadata));
  llvm::XXH128_hash_t objectHash =
      llvm::xxh3_128bits(llvm::arrayRefFromStringRef(object));
  return llvm::formatv("{0:x-16}{1:x-16}{2:x-16}{3:x-16}", hash.high64,
                       hash.low64, objectHash.high64, objectHash.low64)
      .str();
}

json::Array shapeToJSON(const std::vector<int64_t> &shape) {
  json::Array array;
  for (int64_t size : shape)
    array.push_back(size);
  return array;
}

json::Value tensorToJSON(const TensorSpec &spec) {
  json::Object object{{"type", int64_t(spec.type)},
                      {"shape", shapeToJSON(spec.shape)},
                      {"param", spec.param},
                      {"role", int64_t(spec.role)}};
  if (spec.vocab)
    object["vocab"] = *spec.vocab;
  if (!spec.probe.empty())
    object["probe"] = spec.probe;
  return object;
}

json::Value metadataToJSON(const CacheEntry &entry) {
  json::Array functions;
  for (const FunctionSpec &function : entry.functions) {
    json::Array arguments, results;
    for (const TensorSpec &spec : function.arguments)
      arguments.push_back(tensorToJSON(spec));
    for (const TensorSpec &spec : function.results)
      results.push_back(tensorToJSON(spec));
    functions.push_back(json::Object{{"name", function.name},
                                     {"arguments", std::move(arguments)},
                                     {"results", std::move(results)},
                                     {"decoder_of", function.decoderOf}});
  }
  json::Array objectSizes;
  for (const std::string &object : entry.objects)
    objectSizes.push_back(int64_t(object.size()));
  json::Array params;
  for (const ParamSpec &param : entry.params.params)
    params.push_back(json::Object{{"name", param.name},
                                  {"shape", shapeToJSON(param.shape)},
                                  {"dtype", int64_t(param.dtype)},
                                  {"init", int64_t(param.init)},
                                  {"std", param.std},
                                  {"alias", param.alias}});
  return json::Object{
      {"backend", entry.backend},
      {"functions", std::move(functions)},
      {"params", std::move(params)},
      {"constructors", json::Array(entry.constructors)},
      {"destructors", json::Array(entry.destructors)},
      {"objects", std::move(objectSizes)}};
}

/// Reads an enum stored as its integer, at most `last`.
template <typename Enum>
bool readEnum(const json::Object &object, llvm::StringRef key, Enum last,
              Enum &value) {
  std::optional<int64_t> number = object.getInteger(key);
  if (!number || *number < 0 || *number > int64_t(last))
    return false;
  value = Enum(*number);
  return true;
}

bool readShape(const json::Object &object, std::vector<int64_t> &shape) {
  const json::Array *array = object.getArray("shape");
  if (!array)
    return false;
  for (const json::Value &size : *array) {
    std::optional<int64_t> number = size.getAsInteger();
    if (!number)
      return false;
    shape.push_back(*number);
  }
  return true;
}

bool readTensor(const json::Value &value, TensorSpec &spec) {
  const json::Object *object = value.getAsObject();
  if (!object || !readEnum(*object, "type", ElementType::bool_, spec.type) ||
      !readEnum(*object, "role", ArgRole::gradient, spec.role) ||
      !readShape(*object, spec.shape))
    return false;
  std::optional<llvm::StringRef> param = object->getString("param");
  if (!param)
    return false;
  spec.param = param->str();
  if (object->get("vocab")) {
    std::optional<int64_t> vocab = object->getInteger("vocab");
    if (!vocab)
      return false;
    spec.vocab = *vocab;
  }
  if (object->get("probe")) {
    std::optional<llvm::StringRef> probe = object->getString("probe");
    if (!probe)
      return false;
    spec.probe = probe->str();
  }
  return true;
}

bool readTensors(const json::Object &object, llvm::StringRef key,
                 std::vector<TensorSpec> &specs) {
  const json::Array *array = object.getArray(key);
  if (!array)
    return false;
  for (const json::Value &value : *array)
    if (!readTensor(value, specs.emplace_back()))
      return false;
  return true;
}

bool readMetadata(llvm::StringRef text, CacheEntry &entry,
                  std::vector<uint64_t> &objectSizes) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return false;
  }
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return false;
  std::optional<llvm::StringRef> backend = root->getString("backend");
  const json::Array *functions = root->getArray("functions");
  const json::Array *params = root->getArray("params");
  if (!backend || !functions || !params)
    return false;
  entry.backend = backend->str();
  const json::Array *sizes = root->getArray("objects");
  if (!sizes)
    return false;
  for (const json::Value &value : *sizes) {
    std::optional<int64_t> size = value.getAsInteger();
    if (!size || *size < 0)
      return false;
    objectSizes.push_back(uint64_t(*size));
  }
  for (auto [key, names] : {std::pair{"constructors", &entry.constructors},
                            std::pair{"destructors", &entry.destructors}}) {
    const json::Array *array = root->getArray(key);
    if (!array)
      return false;
    for (const json::Value &value : *array) {
      std::optional<llvm::StringRef> name = value.getAsString();
      if (!name)
        return false;
      names->push_back(name->str());
    }
  }
  for (const json::Value &value : *functions) {
    const json::Object *object = value.getAsObject();
    if (!object)
      return false;
    FunctionSpec &function = entry.functions.emplace_back();
    std::optional<llvm::StringRef> name = object->getString("name");
    std::optional<llvm::StringRef> decoderOf = object->getString("decoder_of");
    if (!name || !decoderOf ||
        !readTensors(*object, "arguments", function.arguments) ||
        !readTensors(*object, "results", function.results))
      return false;
    function.name = name->str();
    function.decoderOf = decoderOf->str();
  }
  for (const json::Value &value : *params) {
    const json::Object *object = value.getAsObject();
    if (!object)
      return false;
    ParamSpec &param = entry.params.params.emplace_back();
    std::optional<llvm::StringRef> name = object->getString("name");
    std::optional<llvm::StringRef> alias = object->getString("alias");
    std::optional<double> deviation = object->getNumber("std");
    if (!name || !alias || !deviation || !readShape(*object, param.shape) ||
        !readEnum(*object, "dtype", DType::bf16, param.dtype) ||
        !readEnum(*object, "init", InitKind::row_normal, param.init))
      return false;
    param.name = name->str();
    param.alias = alias->str();
    param.std = *deviation;
  }
  return true;
}

} // namespace

std::string switchyard::runtime::defaultCacheDirectory() {
  if (const char *dir = std::getenv("SWITCHYARD_CACHE_DIR"); dir && *dir)
    return dir;
  llvm::SmallString<256> path;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    path = xdg;
  else if (const char *home = std::getenv("HOME"); home && *home)
    llvm::sys::path::append(path, home, ".cache");
  else
    return "";
  llvm::sys::path::append(path, "switchyard");
  return std::string(path);
}

std::string switchyard::runtime::cacheKey(llvm::StringRef description) {
  std::array<uint8_t, 32> digest = llvm::SHA256::hash(
      llvm::arrayRefFromStringRef(description));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

std::string switchyard::runtime::cacheEntryPath(llvm::StringRef directory,
                                                llvm::StringRef key) {
  llvm::SmallString<256> path(directory);
  llvm::sys::path::append(path, key + ".syc");
  return std::string(path);
}

std::optional<CacheEntry>
switchyard::runtime::readCacheEntry(llvm::StringRef directory,
                                    llvm::StringRef key) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(cacheEntryPath(directory, key),
                                  /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!file)
    return std::nullopt;
  llvm::StringRef contents = (*file)->getBuffer();
  auto [header, body] = contents.split('\n');
  llvm::SmallVector<llvm::StringRef> fields;
  header.split(fields, ' ');
  uint64_t metadataSize = 0, objectSize = 0;
  if (fields.size() != 5 || (fields[0] + " " + fields[1]).str() != kMagic ||
      fields[2].getAsInteger(10, metadataSize) ||
      fields[3].getAsInteger(10, objectSize) ||
      body.size() != metadataSize + objectSize)
    return std::nullopt;
  llvm::StringRef metadata = body.take_front(metadataSize);
  llvm::StringRef object = body.drop_front(metadataSize);
  if (fields[4] != checksum(metadata, object))
    return std::nullopt;
  CacheEntry entry;
  std::vector<uint64_t> objectSizes;
  if (!readMetadata(metadata, entry, objectSizes))
    return std::nullopt;
  for (uint64_t size : objectSizes) {
    if (size > object.size())
      return std::nullopt;
    entry.objects.push_back(object.take_front(size).str());
    object = object.drop_front(size);
  }
  if (!object.empty())
    return std::nullopt;
  return entry;
}

llvm::Error switchyard::runtime::writeCacheEntry(llvm::StringRef directory,
                                                 llvm::StringRef key,
                                                 const CacheEntry &entry) {
  if (std::error_code error = llvm::sys::fs::create_directories(directory))
    return llvm::createStringError(
        error, llvm::formatv("compile cache '{0}': {1}", directory,
                             error.message()));
  std::string metadata;
  llvm::raw_string_ostream(metadata) << metadataToJSON(entry);
  std::string objects;
  for (const std::string &object : entry.objects)
    objects += object;
  std::string header =
      llvm::formatv("{0} {1} {2} {3}\n", kMagic, metadata.size(),
                    objects.size(), checksum(metadata, objects))
          .str();
  return tensorfile::writeFileAtomically(cacheEntryPath(directory, key),
                                         {header, metadata, objects});
}

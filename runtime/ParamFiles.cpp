//===- ParamFiles.cpp - a model's parameters from safetensors files -------===//
//
// Implements the binding rules of ParamFiles.h and the conversion of legacy
// Transformer-XL positional weights.
//
//===----------------------------------------------------------------------===//

#include "runtime/ParamFiles.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <optional>

using namespace switchyard::runtime;
using llvm::Expected;

namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "x" : "") + std::to_string(shape[i]);
  return text.empty() ? "scalar" : text;
}

std::string describe(ElementType type, llvm::ArrayRef<int64_t> shape) {
  return shapeText(shape) + " " + std::string(toString(type));
}

/// How a parameter is named for a person: `name`, with its official name.
std::string nameOf(const ParamSpec &spec) {
  std::string text = "'" + spec.name + "'";
  if (!spec.alias.empty() && spec.alias != spec.name)
    text += " (official name '" + spec.alias + "')";
  return text;
}

std::string renamed(const std::string &name,
                    const std::vector<Rename> &renames) {
  for (const Rename &rule : renames)
    if (llvm::StringRef(name).starts_with(rule.from))
      return rule.to + name.substr(rule.from.size());
  return name;
}

/// `tensor` as the element type `type`: itself, or f16/bf16 widened to f32.
std::optional<HostTensor> asType(HostTensor tensor, ElementType type) {
  if (tensor.type == type)
    return tensor;
  if (type != ElementType::f32 ||
      (tensor.type != ElementType::f16 && tensor.type != ElementType::bf16))
    return std::nullopt;
  const llvm::fltSemantics &semantics = tensor.type == ElementType::f16
                                            ? llvm::APFloat::IEEEhalf()
                                            : llvm::APFloat::BFloat();
  std::vector<float> values;
  for (uint16_t bits : tensor.values<uint16_t>())
    values.push_back(
        llvm::APFloat(semantics, llvm::APInt(16, bits)).convertToFloat());
  return HostTensor::fromValues<float>(std::move(tensor.name),
                                       ElementType::f32,
                                       std::move(tensor.shape), values);
}

/// Tensors of a training checkpoint that are not parameters.
bool isTrainingState(llvm::StringRef name) {
  return name.starts_with("optimizer.") || name.starts_with("state.");
}

} // namespace

llvm::Error switchyard::runtime::checkFinite(const HostTensor &tensor,
                                             const llvm::Twine &what) {
  int64_t count = 0, first = -1;
  auto visit = [&](int64_t index, bool finite) {
    if (finite)
      return;
    if (first < 0)
      first = index;
    ++count;
  };
  if (tensor.type == ElementType::f32) {
    std::span<const float> values = tensor.values<float>();
    for (size_t i = 0; i < values.size(); ++i)
      visit(int64_t(i), std::isfinite(values[i]));
  } else if (tensor.type == ElementType::f64) {
    std::span<const double> values = tensor.values<double>();
    for (size_t i = 0; i < values.size(); ++i)
      visit(int64_t(i), std::isfinite(values[i]));
  } else if (tensor.type == ElementType::f16 ||
             tensor.type == ElementType::bf16) {
    // All exponent bits set: an infinity or a NaN.
    uint16_t exponent = tensor.type == ElementType::f16 ? 0x7c00 : 0x7f80;
    std::span<const uint16_t> values = tensor.values<uint16_t>();
    for (size_t i = 0; i < values.size(); ++i)
      visit(int64_t(i), (values[i] & exponent) != exponent);
  }
  if (count == 0)
    return llvm::Error::success();
  return failure(what + llvm::formatv(" holds {0} NaN or infinite value{1} "
                                      "(the first at element {2}); a "
                                      "diverged or damaged file?",
                                      count, count == 1 ? "" : "s", first)
                            .str());
}

Expected<Rename> switchyard::runtime::parseRename(llvm::StringRef text) {
  auto [from, to] = text.split('=');
  if (from.size() == text.size())
    return failure("rename rule '" + text +
                   "' has no '=' (expected FROM=TO, e.g. "
                   "'model.layers.=layers.' or '=layers.0.att.')");
  return Rename{from.str(), to.str()};
}

bool switchyard::runtime::hasLegacyXlPositions(
    const TensorMetadata &metadata) {
  auto it = metadata.find("format");
  return it != metadata.end() &&
         (it->second == "switchyard" ||
          it->second == "switchyard-checkpoint-1");
}

bool switchyard::runtime::isXlPositionWeight(const ParamTable &table,
                                             const ParamSpec &spec) {
  llvm::StringRef name = spec.name;
  if (!name.ends_with(".pos") || spec.shape.size() != 2 ||
      spec.shape[1] % 2 != 0)
    return false;
  const ParamSpec *query = table.find(name.drop_back(3).str() + "q");
  return query && query->shape == spec.shape;
}

void switchyard::runtime::convertLegacyXlPosition(HostTensor &tensor,
                                                  bool secondMoment) {
  assert(tensor.shape.size() == 2 && tensor.shape[1] % 2 == 0 &&
         toDType(tensor.type) && "an XL positional weight [H·F, D], floats");
  size_t size = sizeOf(tensor.type);
  int64_t rows = tensor.shape[0], width = tensor.shape[1], half = width / 2;
  std::vector<uint8_t> row(size_t(width) * size);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t *w = tensor.bytes.data() + size_t(r * width) * size;
    for (int64_t i = 0; i < half; ++i) {
      std::memcpy(&row[size_t(2 * i) * size], w + size_t(i) * size, size);
      std::memcpy(&row[size_t(2 * i + 1) * size], w + size_t(half + i) * size,
                  size);
      // Little-endian: the sign is the top bit of the element's last byte.
      if (!secondMoment)
        row[size_t(2 * i) * size + size - 1] ^= 0x80;
    }
    std::copy(row.begin(), row.end(), w);
  }
}

Expected<std::vector<HostTensor>> switchyard::runtime::readParamFiles(
    const ParamTable &table, llvm::ArrayRef<std::string> paths,
    const ParamFileOptions &options) {
  auto note = [&](const std::string &line) {
    if (options.note)
      options.note(line);
  };
  // Refused before reading or initialising a byte.
  if (std::string shortfall = checkParamsFit(table, 1, "the parameters");
      !shortfall.empty())
    return failure(shortfall);
  std::vector<std::optional<HostTensor>> bound(table.params.size());
  // Where each bound parameter came from, for the error of a second one.
  std::vector<std::string> origin(table.params.size());
  std::vector<std::string> unknown;

  for (const std::string &path : paths) {
    TensorMetadata metadata;
    Expected<std::vector<HostTensor>> file = readSafetensors(path, &metadata);
    if (!file)
      return file.takeError();
    if (options.checkFile)
      if (llvm::Error error = options.checkFile(path, metadata))
        return std::move(error);
    bool checkpoint = metadata.count("format") &&
                      llvm::StringRef(metadata["format"])
                          .starts_with("switchyard-checkpoint-");
    std::vector<size_t> fromThisFile;
    for (HostTensor &tensor : *file) {
      if (checkpoint && isTrainingState(tensor.name))
        continue;
      std::string name = renamed(tensor.name, options.renames);
      const ParamSpec *spec = table.findByNameOrAlias(name);
      std::string what = "tensor '" + tensor.name + "'";
      if (name != tensor.name)
        what += " (read as '" + name + "')";
      if (!spec) {
        unknown.push_back(path + ": " + what);
        continue;
      }
      size_t index = size_t(spec - table.params.data());
      std::string here = path + ": " + what;
      if (bound[index])
        return failure(here + " gives parameter " + nameOf(*spec) +
                       ", which " + origin[index] + " already gave");
      ElementType want = toElementType(spec->dtype);
      if (tensor.shape != spec->shape)
        return failure(here + " has shape " + shapeText(tensor.shape) +
                       ", but parameter " + nameOf(*spec) +
                       " is declared " + describe(want, spec->shape));
      std::string type(toString(tensor.type));
      std::optional<HostTensor> converted = asType(std::move(tensor), want);
      if (!converted)
        return failure(here + " holds " + type + " elements, but parameter " +
                       nameOf(*spec) + " is declared " +
                       describe(want, spec->shape) +
                       " (f16 and bf16 files are read into f32 parameters)");
      if (llvm::Error error = checkFinite(*converted, here))
        return std::move(error);
      converted->name = spec->name;
      bound[index] = std::move(*converted);
      origin[index] = here;
      fromThisFile.push_back(index);
    }
    if (hasLegacyXlPositions(metadata))
      for (size_t index : fromThisFile) {
        const ParamSpec &spec = table.params[index];
        if (!isXlPositionWeight(table, spec))
          continue;
        convertLegacyXlPosition(*bound[index], /*secondMoment=*/false);
        note(path + ": '" + spec.name +
             "' converted from the XL encoding of files written before "
             "Switchyard followed the official SwitchHeadXL");
      }
  }

  if (!unknown.empty()) {
    std::string list;
    for (size_t i = 0; i < unknown.size() && i < 8; ++i)
      list += "\n  " + unknown[i];
    if (unknown.size() > 8)
      list += llvm::formatv("\n  ... and {0} more", unknown.size() - 8).str();
    bool one = unknown.size() == 1;
    note(llvm::formatv("{0} {1} to no parameter of the model and {2} "
                       "ignored:{3}",
                       unknown.size(), one ? "tensor binds" : "tensors bind",
                       one ? "is" : "are", list)
             .str());
  }

  std::vector<std::string> missing;
  for (auto [spec, tensor] : llvm::zip(table.params, bound))
    if (!tensor)
      missing.push_back(spec.name);
  if (!missing.empty() && !options.initMissing) {
    std::string list;
    const size_t shown = 12;
    for (size_t i = 0; i < missing.size(); ++i) {
      if (i == shown) {
        list += llvm::formatv("\n  ... and {0} more", missing.size() - shown)
                    .str();
        break;
      }
      const ParamSpec &spec = *table.find(missing[i]);
      list += "\n  " + nameOf(spec) + " " +
              describe(toElementType(spec.dtype), spec.shape);
    }
    std::string files = paths.size() == 1 ? paths.front() : "the files";
    return failure(llvm::formatv("{0}: {1} parameter{2} of the model {3} "
                                 "missing:{4}\n(--init-missing initialises "
                                 "them from their declared initialisers)",
                                 files, missing.size(),
                                 missing.size() == 1 ? "" : "s",
                                 missing.size() == 1 ? "is" : "are", list)
                       .str());
  }

  std::vector<HostTensor> params;
  for (auto [spec, tensor] : llvm::zip(table.params, bound)) {
    if (tensor) {
      params.push_back(std::move(*tensor));
      continue;
    }
    if (spec.dtype != DType::f32)
      return failure("parameter '" + spec.name +
                     "' is in no file and only f32 parameters can be "
                     "initialised");
    std::vector<float> values(size_t(spec.numElements()));
    initialize(spec, options.seed, values);
    params.push_back(HostTensor::fromValues<float>(
        spec.name, ElementType::f32, spec.shape, values));
    note("'" + spec.name + "' is in no file: initialised " +
         std::string(toString(spec.init)));
  }
  return params;
}

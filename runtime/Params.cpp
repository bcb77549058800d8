//===- Params.cpp - parameter tables and initialisers ---------------------===//
//
// Implements parameter bookkeeping and the reproducible initialisers.
//
//===----------------------------------------------------------------------===//

#include "runtime/Params.h"

#include <cassert>
#include <cstdio>
#include <cmath>
#include <limits>
#include <numbers>

#include <unistd.h>

using namespace switchyard::runtime;

std::string_view switchyard::runtime::toString(DType type) {
  switch (type) {
  case DType::f32:
    return "f32";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  }
  return "?";
}

std::string_view switchyard::runtime::toString(InitKind kind) {
  switch (kind) {
  case InitKind::zeros:
    return "zeros";
  case InitKind::ones:
    return "ones";
  case InitKind::normal:
    return "normal";
  case InitKind::row_normal:
    return "row_normal";
  }
  return "?";
}

std::optional<DType> switchyard::runtime::parseDType(std::string_view name) {
  for (DType type : {DType::f32, DType::f16, DType::bf16})
    if (toString(type) == name)
      return type;
  return std::nullopt;
}

std::optional<InitKind>
switchyard::runtime::parseInitKind(std::string_view name) {
  for (InitKind kind : {InitKind::zeros, InitKind::ones, InitKind::normal,
                        InitKind::row_normal})
    if (toString(kind) == name)
      return kind;
  return std::nullopt;
}

size_t switchyard::runtime::sizeOf(DType type) {
  return type == DType::f32 ? 4 : 2;
}

int64_t ParamSpec::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

int64_t ParamTable::totalElements() const {
  int64_t total = 0;
  for (const ParamSpec &spec : params)
    if (__builtin_add_overflow(total, spec.numElements(), &total))
      return std::numeric_limits<int64_t>::max();
  return total;
}

int64_t ParamTable::totalBytes() const {
  int64_t total = 0, bytes = 0;
  for (const ParamSpec &spec : params)
    if (__builtin_mul_overflow(spec.numElements(),
                               int64_t(sizeOf(spec.dtype)), &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      return std::numeric_limits<int64_t>::max();
  return total;
}

uint64_t switchyard::runtime::physicalMemory() {
  static const uint64_t bytes = [] {
    long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page)
                                 : uint64_t(0);
  }();
  return bytes;
}

std::string switchyard::runtime::checkParamsFit(const ParamTable &table,
                                                int copies,
                                                std::string_view what) {
  uint64_t memory = physicalMemory();
  double need = double(table.totalBytes()) * copies;
  if (memory == 0 || need <= double(memory))
    return {};
  char text[200];
  std::snprintf(text, sizeof text,
                "%.*s need %.2f GB (%lld parameters); this machine has "
                "%.2f GB",
                int(what.size()), what.data(), need / 1e9,
                (long long)table.totalElements(), double(memory) / 1e9);
  return text;
}

const ParamSpec *ParamTable::find(std::string_view name) const {
  for (const ParamSpec &spec : params)
    if (spec.name == name)
      return &spec;
  return nullptr;
}

const ParamSpec *
ParamTable::findByNameOrAlias(std::string_view name) const {
  if (const ParamSpec *spec = find(name))
    return spec;
  for (const ParamSpec &spec : params)
    if (!spec.alias.empty() && spec.alias == name)
      return &spec;
  return nullptr;
}

uint64_t switchyard::runtime::splitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {
/// FNV-1a of the parameter name: gives each parameter its own stream.
uint64_t hashName(std::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : name)
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return hash;
}

/// A uniform double in (0, 1) from 53 random bits.
double uniformOpen(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

/// Standard normal sample number `i` of the stream `key` (Box-Muller, one
/// pair of uniforms per pair of samples).
double normalSample(uint64_t key, int64_t i) {
  uint64_t pair = static_cast<uint64_t>(i) / 2;
  double u1 = uniformOpen(splitMix64(key ^ splitMix64(2 * pair)));
  double u2 = uniformOpen(splitMix64(key ^ splitMix64(2 * pair + 1)));
  double radius = std::sqrt(-2.0 * std::log(u1));
  double angle = 2.0 * std::numbers::pi * u2;
  return (i % 2 == 0) ? radius * std::cos(angle) : radius * std::sin(angle);
}
} // namespace

void switchyard::runtime::initialize(const ParamSpec &spec, uint64_t seed,
                                     std::span<float> out) {
  assert(static_cast<int64_t>(out.size()) == spec.numElements() &&
         "output span must hold the whole parameter");
  switch (spec.init) {
  case InitKind::zeros:
  case InitKind::ones:
    for (float &value : out)
      value = spec.init == InitKind::ones ? 1.0f : 0.0f;
    return;
  case InitKind::normal:
  case InitKind::row_normal:
    break;
  }
  uint64_t key = splitMix64(seed) ^ hashName(spec.name);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<float>(spec.std * normalSample(key, int64_t(i)));
  if (spec.init != InitKind::row_normal || spec.shape.empty())
    return;
  // Rescale every row to norm std·√cols: unit direction, overall std kept.
  size_t cols = static_cast<size_t>(spec.shape.back());
  double target = spec.std * std::sqrt(static_cast<double>(cols));
  for (size_t row = 0; row + cols <= out.size(); row += cols) {
    double norm = 0.0;
    for (size_t c = 0; c < cols; ++c)
      norm += double(out[row + c]) * double(out[row + c]);
    norm = std::sqrt(norm);
    if (norm == 0.0)
      continue;
    for (size_t c = 0; c < cols; ++c)
      out[row + c] = static_cast<float>(double(out[row + c]) * target / norm);
  }
}

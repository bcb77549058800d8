//===- Params.h - parameter tables and initialisers -------------*- C++ -*-===//
//
// The runtime's view of a model's parameters: name, shape, element type and
// initialiser, as declared by `lm.param` in a compiled model. Plain C++: no
// MLIR or LLVM types cross this header.
//
// Initialisation is reproducible bit for bit on every machine: element i of
// a parameter is a function of (seed, parameter name, i) only, through a
// counter-based generator (SplitMix64) and the Box-Muller transform, so it
// depends neither on the C++ library nor on the order parameters are
// initialised in.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_PARAMS_H
#define SWITCHYARD_RUNTIME_PARAMS_H

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace switchyard::runtime {

/// Element types of parameters and activations.
enum class DType : uint8_t { f32, f16, bf16 };

/// How a parameter is initialised (mirrors #lm.init).
enum class InitKind : uint8_t { zeros, ones, normal, row_normal };

std::string_view toString(DType type);
std::string_view toString(InitKind kind);
std::optional<DType> parseDType(std::string_view name);
std::optional<InitKind> parseInitKind(std::string_view name);

/// The SplitMix64 finaliser, a bijective 64-bit mixer: the runtime's
/// counter-based source of reproducible randomness (initialisers, batches).
uint64_t splitMix64(uint64_t z);

/// The size of one element in bytes.
size_t sizeOf(DType type);

/// One named parameter.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  InitKind init = InitKind::zeros;
  /// Deviation of `normal` and `row_normal`; 0 otherwise.
  double std = 0.0;
  /// The name the official implementation gives this tensor (lm.param's
  /// alias), accepted in parameter files in place of `name`; empty if none.
  std::string alias = {};

  int64_t numElements() const;
};

/// The parameters of a model, in declaration order.
struct ParamTable {
  std::vector<ParamSpec> params;

  /// The total number of scalar parameters (the largest int64_t when the
  /// sum overflows).
  int64_t totalElements() const;
  /// The bytes the parameters take in memory (saturating likewise).
  int64_t totalBytes() const;
  /// The parameter called `name`, or nullptr.
  const ParamSpec *find(std::string_view name) const;
  /// The parameter called `name` or, failing that, whose alias is `name`, or
  /// nullptr.
  const ParamSpec *findByNameOrAlias(std::string_view name) const;
};

/// The machine's physical memory in bytes (0 when unknown).
uint64_t physicalMemory();

/// An empty string when `copies` copies of `table`'s parameters fit in the
/// machine's physical memory; else a message that says what `what` (e.g.
/// "the parameters and AdamW's two moments") needs and what there is,
/// before anything that large is allocated.
std::string checkParamsFit(const ParamTable &table, int copies,
                           std::string_view what);

/// Fills `out` (numElements() floats) with the initial value of `spec` for
/// the given seed. `row_normal` draws normal samples and rescales each row
/// (the last dimension) to L2 norm std·√cols.
void initialize(const ParamSpec &spec, uint64_t seed, std::span<float> out);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_PARAMS_H

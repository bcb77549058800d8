//===- ParamFiles.h - a model's parameters from safetensors files -*- C++ -*-===//
//
// Binds the parameters a compiled model declares to the tensors of
// safetensors files: Switchyard's own (`switchyard run --save-params`,
// training checkpoints) and files written elsewhere under the official
// implementation's names (`q.weight`, `pos_to_pk`, `keys`, ...; each
// ParamSpec's alias). The rules, for every tensor of every file:
//   1. the rename rules rewrite its name (the first rule whose `from` is a
//      prefix of the name replaces that prefix by `to`);
//   2. it binds to the parameter of that name or, failing that, to the
//      parameter whose alias it is;
//   3. it must have the parameter's shape, and its element type or a
//      narrower float type (f16 and bf16 widen to f32 exactly);
//   4. its values must be finite (a NaN or an infinity is refused by name).
// A parameter bound twice, a shape or type that differs, and a parameter no
// file holds are errors that name the tensor, the file and what was
// expected; tensors that bind to nothing are reported as notes (a file may
// hold more than one model). A training checkpoint's optimizer state and XL
// memories are not parameters and are skipped.
//
// Files of the legacy formats (metadata format `switchyard` or
// `switchyard-checkpoint-1`) hold XL positional weights for the legacy
// Transformer-XL encoding table, not the official one; they are converted as
// they are read, exactly (convertLegacyXlPositions).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_PARAMFILES_H
#define SWITCHYARD_RUNTIME_PARAMFILES_H

#include "runtime/Params.h"
#include "runtime/TensorFile.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace switchyard::runtime {

/// The metadata `format` of the files Switchyard writes: training
/// checkpoints and plain parameter files.
inline constexpr char kCheckpointFormat[] = "switchyard-checkpoint-2";
inline constexpr char kParamsFormat[] = "switchyard-params-2";

/// Reads tensor names that start with `from` as starting with `to` instead.
/// An empty `from` prefixes every name with `to`.
struct Rename {
  std::string from, to;
};

/// Parses a rename rule written `FROM=TO`.
llvm::Expected<Rename> parseRename(llvm::StringRef text);

struct ParamFileOptions {
  std::vector<Rename> renames;
  /// Initialise the parameters that no file holds from their declared
  /// initialisers and `seed` (f32 parameters only), each reported through
  /// `note`, instead of failing.
  bool initMissing = false;
  uint64_t seed = 0;
  /// Receives one line per remark: tensors ignored, parameters converted or
  /// initialised. May be empty.
  std::function<void(const std::string &)> note;
  /// Called with each file's path and metadata before its tensors bind; an
  /// error stops the reading. May be empty.
  std::function<llvm::Error(const std::string &, const TensorMetadata &)>
      checkFile;
};

/// The parameters of `table`, in its order and with its names, bound from
/// the tensors of the safetensors files `paths` by the rules above.
llvm::Expected<std::vector<HostTensor>>
readParamFiles(const ParamTable &table, llvm::ArrayRef<std::string> paths,
               const ParamFileOptions &options);

/// An error when a float tensor holds a NaN or an infinity, naming `what`
/// (e.g. the file and the tensor), the first such element and how many
/// there are; success for finite tensors and those of other types.
llvm::Error checkFinite(const HostTensor &tensor, const llvm::Twine &what);

/// True when `metadata` is that of a legacy Switchyard file, whose XL
/// positional weights use the legacy Transformer-XL encoding.
bool hasLegacyXlPositions(const TensorMetadata &metadata);

/// Whether `spec` is the positional projection `<layer>.pos` [H·F, D] of an
/// XL attention layer of `table` (lm.mha and lm.switchhead name it so, next
/// to their query weight `<layer>.q` of the same shape).
bool isXlPositionWeight(const ParamTable &table, const ParamSpec &spec);

/// Converts, in place, an XL positional weight [H·F, D] (or an Adam moment
/// of one) from the legacy encoding to the official one. The legacy table
/// has halves `[sin(δω_i)…, cos(δω_i)…]` of the distance δ = query − key;
/// the official one interleaves `sin(pω_i), cos(pω_i)` of p = key − query =
/// −δ. The same relative keys therefore come from column 2i = −(legacy
/// column i) and column 2i+1 = legacy column D/2 + i, exactly.
/// `secondMoment`: the tensor holds Adam's second moments (squares), which
/// move without the sign. Floats only (f32, f16, bf16).
void convertLegacyXlPosition(HostTensor &tensor, bool secondMoment);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_PARAMFILES_H

//===- FusionOptions.h - which moe fusions to apply -------------*- C++ -*-===//
//
// A plain struct, shared by the pipelines and the runtime (whose headers
// carry no MLIR types).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_PIPELINES_FUSIONOPTIONS_H
#define SWITCHYARD_LIB_PIPELINES_FUSIONOPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::switchyard {

/// How moe ops become kernels: which fusions run before the lowering to
/// linalg. Each fusion can be switched off; the unfused route computes the
/// same results (tested), so that what a fusion buys can be measured.
struct FusionOptions {
  /// moe-fuse-router: router matmul, sigmoid and top-k in one kernel.
  bool router = true;
  /// moe-fuse-expert-projection: gather, matmul, gate scaling and the
  /// reduction over routes in one kernel, forward and gradients.
  bool expertProjection = true;
  /// moe-fuse-attention: flash-style attention with online softmax, forward
  /// and backward, without a T×T matrix in memory.
  bool attention = true;

  /// No fusion: every moe op through its plain linalg lowering.
  static FusionOptions none() { return {false, false, false}; }

  /// The fusions that make a device's code fastest by switchyard-bench's
  /// measurements (docs/Fusions.md; the numbers are in docs/Performance.md):
  /// on the GPU the router and the attention, the expert projections
  /// unfused (and grouped by expert: the drivers' --experts default), which
  /// beats all three fused for a layer's forward and backward; none on the
  /// CPU. The fused expert projections are row kernels, one thread per row;
  /// on one CPU core the unfused lowerings win too, because their matmuls
  /// run as register-blocked vector kernels.
  static FusionOptions deviceDefault(bool gpu) {
    return gpu ? FusionOptions{true, false, true} : none();
  }

  bool operator==(const FusionOptions &other) const = default;
};

/// Parses a fusion setting: `default` (deviceDefault(gpu)), `all`, `none`,
/// or a comma-separated list of router, expert-projection, attention.
llvm::Expected<FusionOptions> parseFusions(llvm::StringRef spec, bool gpu);

/// The fusions `options` applies, as parseFusions() reads them back: `all`,
/// `none`, or the comma-separated list.
std::string describeFusions(const FusionOptions &options);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_PIPELINES_FUSIONOPTIONS_H

//===- FusionOptions.h - how moe ops become kernels -------------*- C++ -*-===//
//
// A plain struct, shared by the pipelines, the drivers and the runtime
// (whose headers carry no MLIR types), with each target's defaults and the
// one reader of the settings.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_PIPELINES_FUSIONOPTIONS_H
#define SWITCHYARD_LIB_PIPELINES_FUSIONOPTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::switchyard {

/// The targets whose kernel choices differ. The GPU emulation compiles the
/// GPU target's kernels, so it takes the GPU's choices.
enum class Target { Cpu, Gpu };

/// How moe ops become kernels: which fusions run before the lowering to
/// linalg, and how the unfused expert projections compute. Each fusion can
/// be switched off; every setting computes the same results (tested), so
/// that what a fusion buys can be measured.
///
/// This struct is the one description of these choices: the driver's
/// `--fuse`/`--experts`, switchyard-bench, the runtime's CompileOptions and
/// the pipelines' `fuse`/`experts` options are all read by resolveFusions()
/// into it, and each target's defaults are set in targetDefault() only.
struct FusionOptions {
  /// moe-fuse-router: router matmul, sigmoid and top-k in one kernel.
  bool router = true;
  /// moe-fuse-expert-projection: gather, matmul, gate scaling and the
  /// reduction over routes in one kernel, forward and gradients.
  bool expertProjection = true;
  /// moe-fuse-attention: flash-style attention with online softmax, forward
  /// and backward, without a T×T matrix in memory.
  bool attention = true;
  /// The unfused expert projections and their gradients with the routes
  /// grouped by expert (sorted, one matmul per expert: the routes' MACs;
  /// convert-moe-to-linalg `grouped-experts`), or densely over all experts
  /// (E/k times the MACs, as plain matmuls). The fused projections gather
  /// per route either way.
  bool groupedExperts = true;
  /// switchyard-fuse-elementwise: elementwise linalg ops into the ops that
  /// read their results (after the lowering to linalg, on every op of the
  /// program, not only the moe ops').
  bool elementwise = true;
  /// switchyard-fuse-rows: a row reduction and the ops that read its rows
  /// (layer norm, its gradient, the cross-entropy's row sums) in one loop
  /// over rows; on the GPU one kernel, a thread block per row.
  bool rows = true;

  /// Every fusion (the expert grouping as given).
  static FusionOptions all(bool groupedExperts = true) {
    return {true, true, true, groupedExperts, true, true};
  }
  /// No fusion: every moe op through its plain linalg lowering, every
  /// linalg op a loop nest (or kernel) of its own.
  static FusionOptions none(bool groupedExperts = true) {
    return {false, false, false, groupedExperts, false, false};
  }

  /// Each target's defaults: the choices that make its code fastest by
  /// switchyard-bench's measurements (docs/Fusions.md; the numbers are in
  /// docs/Performance.md). On the GPU the router and the attention fused,
  /// the expert projections unfused and grouped by expert, which beats all
  /// three fused for a layer's forward and backward; on the CPU the router
  /// and the expert projections fused (their kernels gather while packing:
  /// FusedKernelForms::cpu), the attention unfused (its fused row kernels
  /// lose to the unfused lowerings' register-blocked matmuls). Both fuse
  /// elementwise ops; the GPU rows too (one kernel, a block per row, for
  /// three to five), which on the CPU measured no faster than the loop
  /// nests one op after another.
  static FusionOptions targetDefault(Target target) {
    if (target == Target::Gpu)
      return {true, false, true, /*groupedExperts=*/true, true, true};
    return {true, true, false, /*groupedExperts=*/true, true, false};
  }

  bool operator==(const FusionOptions &other) const = default;
};

/// How the fused moe ops lower: by default one row kernel each (the GPU's
/// SIMT route), or in the forms the CPU's kernels run fastest.
struct FusedKernelForms {
  /// T > 0: the fused expert ops in the grouped formulation, segments
  /// padded to multiples of T, their kernels gathering rows by route
  /// (convert-moe-to-linalg `fused-expert-tile-rows`).
  int64_t expertTileRows = 0;
  /// moe.fused_router's logits as one matmul, the row kernel reading them
  /// for the sigmoid and top-k (convert-moe-to-linalg
  /// `fused-router-matmul`).
  bool routerLogitsMatmul = false;

  /// The CPU target's: its matmul and grouped kernels do the products, each
  /// expert's rows padded to the kernels' register tile of `tileRows` rows
  /// (cpuKernelTile: 8 on AVX-512, 6 on AVX2). Where the factors are
  /// rounded to `roundContractionOperands` (bf16/f16: the CPU reference of
  /// the GPU, whose fused ops are row kernels), the row kernels.
  static FusedKernelForms cpu(int64_t tileRows,
                              llvm::StringRef roundContractionOperands) {
    if (roundContractionOperands != "f32")
      return {};
    return {tileRows, true};
  }
};

/// Reads a fusion setting `fuse` (`default`, `all`, `none`, or a
/// comma-separated list of router, expert-projection, attention,
/// elementwise) and an
/// expert setting `experts` (`default`, `grouped` or `dense`) over
/// `target`'s defaults. The one reader of these settings.
llvm::Expected<FusionOptions>
resolveFusions(llvm::StringRef fuse, llvm::StringRef experts, Target target);

/// Whether `fuse` and `experts` are settings resolveFusions() reads.
llvm::Error checkFusionSetting(llvm::StringRef fuse);
llvm::Error checkExpertsSetting(llvm::StringRef experts);

/// The fusions `options` applies, as resolveFusions() reads them back:
/// `all`, `none`, or the comma-separated list.
std::string describeFusions(const FusionOptions &options);

/// A command-line parser of strings that accepts only what `check`
/// accepts, reporting its message, so that a pass pipeline's `fuse` and
/// `experts` options are checked when they are parsed.
template <llvm::Error (*check)(llvm::StringRef)>
struct CheckedSettingParser : public llvm::cl::parser<std::string> {
  using llvm::cl::parser<std::string>::parser;
  bool parse(llvm::cl::Option &option, llvm::StringRef, llvm::StringRef arg,
             std::string &value) {
    if (llvm::Error error = check(arg))
      return option.error(llvm::toString(std::move(error)));
    value = arg.str();
    return false;
  }
};
using FusionSettingParser = CheckedSettingParser<checkFusionSetting>;
using ExpertsSettingParser = CheckedSettingParser<checkExpertsSetting>;

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_PIPELINES_FUSIONOPTIONS_H

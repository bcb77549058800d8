//===- FusionOptions.cpp - reading and printing fusion settings -----------===//
//
// The one reader of fusion and expert settings: the `--fuse` and `--experts`
// options of switchyard and switchyard-bench, the runtime's defaults and
// the pipelines' `fuse` and `experts` options.
//
//===----------------------------------------------------------------------===//

#include "lib/Pipelines/FusionOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir::switchyard;

/// Applies `spec` to the three fusions of `fusion`.
static llvm::Error applyFusionSetting(llvm::StringRef spec,
                                     FusionOptions &fusion) {
  spec = spec.trim();
  if (spec == "default")
    return llvm::Error::success();
  if (spec == "all" || spec == "none") {
    bool on = spec == "all";
    fusion.router = fusion.expertProjection = fusion.attention = on;
    return llvm::Error::success();
  }
  fusion.router = fusion.expertProjection = fusion.attention = false;
  llvm::SmallVector<llvm::StringRef> names;
  spec.split(names, ',');
  for (llvm::StringRef name : names) {
    bool *flag = llvm::StringSwitch<bool *>(name.trim())
                     .Case("router", &fusion.router)
                     .Case("expert-projection", &fusion.expertProjection)
                     .Case("attention", &fusion.attention)
                     .Default(nullptr);
    if (!flag)
      return llvm::createStringError(
          "unknown fusion '" + name.trim().str() +
          "'; expected default, all, none, or a comma-separated list of "
          "router, expert-projection, attention");
    *flag = true;
  }
  return llvm::Error::success();
}

/// Applies `spec` to the expert grouping of `fusion`.
static llvm::Error applyExpertsSetting(llvm::StringRef spec,
                                      FusionOptions &fusion) {
  spec = spec.trim();
  if (spec == "default")
    return llvm::Error::success();
  if (spec != "grouped" && spec != "dense")
    return llvm::createStringError("expected default, grouped or dense, "
                                   "found '" +
                                   spec.str() + "'");
  fusion.groupedExperts = spec == "grouped";
  return llvm::Error::success();
}

llvm::Expected<FusionOptions>
mlir::switchyard::resolveFusions(llvm::StringRef fuse, llvm::StringRef experts,
                                 Target target) {
  FusionOptions fusion = FusionOptions::targetDefault(target);
  if (llvm::Error error = applyFusionSetting(fuse, fusion))
    return std::move(error);
  if (llvm::Error error = applyExpertsSetting(experts, fusion))
    return std::move(error);
  return fusion;
}

llvm::Error mlir::switchyard::checkFusionSetting(llvm::StringRef fuse) {
  FusionOptions fusion;
  return applyFusionSetting(fuse, fusion);
}

llvm::Error mlir::switchyard::checkExpertsSetting(llvm::StringRef experts) {
  FusionOptions fusion;
  return applyExpertsSetting(experts, fusion);
}

std::string mlir::switchyard::describeFusions(const FusionOptions &options) {
  if (options.router && options.expertProjection && options.attention)
    return "all";
  if (!options.router && !options.expertProjection && !options.attention)
    return "none";
  std::string list;
  for (auto [on, name] : {std::pair{options.router, "router"},
                          {options.expertProjection, "expert-projection"},
                          {options.attention, "attention"}})
    if (on)
      list += (list.empty() ? "" : ",") + std::string(name);
  return list;
}

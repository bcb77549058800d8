//===- FusionOptions.cpp - reading and printing fusion settings -----------===//
//
// The one reader of fusion and expert settings: the `--fuse` and `--experts`
// options of switchyard and switchyard-bench, the runtime's defaults and
// the pipelines' `fuse` and `experts` options.
//
//===----------------------------------------------------------------------===//

#include "lib/Pipelines/FusionOptions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <array>

using namespace mlir::switchyard;

/// The fusions a setting names, with their names.
static std::array<std::pair<bool FusionOptions::*, llvm::StringLiteral>, 5>
    kFusionNames = {{{&FusionOptions::router, "router"},
                     {&FusionOptions::expertProjection, "expert-projection"},
                     {&FusionOptions::attention, "attention"},
                     {&FusionOptions::elementwise, "elementwise"},
                     {&FusionOptions::rows, "rows"}}};

/// Applies `spec` to the fusions of `fusion`.
static llvm::Error applyFusionSetting(llvm::StringRef spec,
                                      FusionOptions &fusion) {
  spec = spec.trim();
  if (spec == "default")
    return llvm::Error::success();
  bool on = spec == "all";
  for (auto [flag, name] : kFusionNames)
    fusion.*flag = on;
  if (spec == "all" || spec == "none")
    return llvm::Error::success();
  llvm::SmallVector<llvm::StringRef> names;
  spec.split(names, ',');
  for (llvm::StringRef name : names) {
    const auto *known = llvm::find_if(kFusionNames, [&](const auto &entry) {
      return entry.second == name.trim();
    });
    if (known == kFusionNames.end())
      return llvm::createStringError(
          "unknown fusion '" + name.trim().str() +
          "'; expected default, all, none, or a comma-separated list of "
          "router, expert-projection, attention, elementwise, rows");
    fusion.*(known->first) = true;
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
  auto isOn = [&](const auto &entry) { return options.*(entry.first); };
  if (llvm::all_of(kFusionNames, isOn))
    return "all";
  if (llvm::none_of(kFusionNames, isOn))
    return "none";
  std::string list;
  for (const auto &entry : kFusionNames)
    if (isOn(entry))
      list += (list.empty() ? "" : ",") + entry.second.str();
  return list;
}

//===- FusionOptions.cpp - parsing and printing fusion settings -----------===//
//
// The one reader of fusion settings (`--fuse` of switchyard and
// switchyard-bench), see lib/Pipelines/FusionOptions.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Pipelines/FusionOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir::switchyard;

llvm::Expected<FusionOptions>
mlir::switchyard::parseFusions(llvm::StringRef spec, bool gpu) {
  spec = spec.trim();
  if (spec == "default")
    return FusionOptions::deviceDefault(gpu);
  if (spec == "all")
    return FusionOptions();
  FusionOptions fusion = FusionOptions::none();
  if (spec == "none")
    return fusion;
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
  return fusion;
}

std::string mlir::switchyard::describeFusions(const FusionOptions &options) {
  if (options == FusionOptions())
    return "all";
  if (options == FusionOptions::none())
    return "none";
  std::string list;
  for (auto [on, name] : {std::pair{options.router, "router"},
                          {options.expertProjection, "expert-projection"},
                          {options.attention, "attention"}})
    if (on)
      list += (list.empty() ? "" : ",") + std::string(name);
  return list;
}

//===- SplitModule.cpp - a compiled module in parts for parallel codegen --===//
//
// The loop nests are cloned out (llvm::CloneModule with a definition
// filter) into parts balanced by instruction count, written as bitcode,
// and their bodies deleted here.
//
//===----------------------------------------------------------------------===//

#include "lib/Target/LLVMIR/SplitModule.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

#include <algorithm>

using llvm::Function;

bool mlir::switchyard::isStraightLine(const Function &function) {
  return function.hasOptNone() ||
         function.hasFnAttribute(llvm::Attribute::AlwaysInline) ||
         function.getName().starts_with("_mlir_");
}

namespace {

/// Whether an instruction of one of `functions` uses `value`, directly or
/// through constant expressions.
bool usedIn(const llvm::Value *value,
            const llvm::DenseSet<const Function *> &functions) {
  for (const llvm::User *user : value->users()) {
    if (auto *instruction = llvm::dyn_cast<llvm::Instruction>(user)) {
      if (functions.contains(instruction->getFunction()))
        return true;
    } else if (llvm::isa<llvm::ConstantExpr>(user) && usedIn(user, functions)) {
      return true;
    }
  }
  return false;
}

} // namespace

std::vector<std::string>
mlir::switchyard::splitOffLoopNests(llvm::Module &module, unsigned parts) {
  llvm::SmallVector<std::pair<size_t, Function *>> nests;
  for (Function &function : module)
    if (!function.isDeclaration() && !isStraightLine(function))
      nests.emplace_back(function.getInstructionCount(), &function);
  if (nests.empty() || parts == 0)
    return {};

  // What one side of the split refers to on the other links by name: the
  // loop nests, and what they refer to that stays (constants excepted,
  // which each part copies); the rest keeps its linkage (an always-inline
  // entry point has to stay internal to disappear once inlined).
  llvm::DenseSet<const Function *> moved;
  for (auto [count, function] : nests)
    moved.insert(function);
  auto externalize = [](llvm::GlobalValue &value) {
    if (!value.hasLocalLinkage() || value.isDeclaration())
      return;
    if (!value.hasName())
      value.setName("switchyard.split");
    value.setLinkage(llvm::GlobalValue::ExternalLinkage);
    value.setVisibility(llvm::GlobalValue::DefaultVisibility);
  };
  for (llvm::GlobalValue &value : module.global_values()) {
    auto *function = llvm::dyn_cast<Function>(&value);
    auto *variable = llvm::dyn_cast<llvm::GlobalVariable>(&value);
    bool copied = variable && variable->isConstant() &&
                  variable->hasInitializer();
    if ((function && moved.contains(function)) ||
        (!copied && usedIn(&value, moved)))
      externalize(value);
  }

  // Largest first, each to the lightest part.
  std::stable_sort(nests.begin(), nests.end(), [](const auto &a, const auto &b) {
    return a.first > b.first;
  });
  parts = std::min<unsigned>(parts, nests.size());
  std::vector<llvm::DenseSet<const Function *>> members(parts);
  std::vector<size_t> weights(parts, 0);
  for (auto [count, function] : nests) {
    size_t lightest =
        std::min_element(weights.begin(), weights.end()) - weights.begin();
    members[lightest].insert(function);
    weights[lightest] += count + 1;
  }

  std::vector<std::string> bitcode;
  for (const llvm::DenseSet<const Function *> &mine : members) {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> part = llvm::CloneModule(
        module, map, [&](const llvm::GlobalValue *value) {
          if (auto *function = llvm::dyn_cast<Function>(value))
            return mine.contains(function);
          auto *variable = llvm::dyn_cast<llvm::GlobalVariable>(value);
          return variable && variable->isConstant() &&
                 variable->hasInitializer() && usedIn(variable, mine);
        });
    for (llvm::GlobalVariable &variable : part->globals())
      if (!variable.isDeclaration())
        variable.setLinkage(llvm::GlobalValue::InternalLinkage);
    std::string &text = bitcode.emplace_back();
    llvm::raw_string_ostream os(text);
    llvm::WriteBitcodeToFile(*part, os);
  }
  for (auto [count, function] : nests)
    function->deleteBody();
  return bitcode;
}

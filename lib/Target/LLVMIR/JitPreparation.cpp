//===- JitPreparation.cpp - readying compiled modules for the JIT ---------===//
//
// The rewrites between Switchyard's LLVM-dialect output and MLIR's
// ExecutionEngine: the entry points' linkage and attributes in the LLVM
// dialect, and, on the translated LLVM IR, aggregate stores split by field
// and straight-line blocks cut short, so that -O0 instruction selection
// stays fast.
//
//===----------------------------------------------------------------------===//

#include "lib/Target/LLVMIR/JitPreparation.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Local.h"

#include <algorithm>
#include <functional>

void mlir::switchyard::storeAggregatesByField(llvm::Module &module) {
  llvm::SmallVector<llvm::StoreInst *> stores;
  for (llvm::Function &function : module)
    for (llvm::Instruction &instruction : llvm::instructions(function))
      if (auto *store = llvm::dyn_cast<llvm::StoreInst>(&instruction))
        if (store->getValueOperand()->getType()->isAggregateType() &&
            store->isSimple())
          stores.push_back(store);
  const llvm::DataLayout &layout = module.getDataLayout();
  llvm::Type *i32 = llvm::Type::getInt32Ty(module.getContext());
  for (llvm::StoreInst *store : stores) {
    llvm::Value *aggregate = store->getValueOperand();
    llvm::Type *type = aggregate->getType();
    llvm::IRBuilder<> builder(store);
    llvm::SmallVector<unsigned> path;
    // Visits the scalar fields of `field`, the field at `path` of `type`.
    std::function<void(llvm::Type *)> visit = [&](llvm::Type *field) {
      if (field->isAggregateType()) {
        unsigned count = field->isStructTy() ? field->getStructNumElements()
                                             : field->getArrayNumElements();
        for (unsigned i = 0; i < count; ++i) {
          path.push_back(i);
          visit(llvm::ExtractValueInst::getIndexedType(field, i));
          path.pop_back();
        }
        return;
      }
      llvm::Value *value =
          llvm::FindInsertedValue(aggregate, path, store->getIterator());
      if (!value)
        value = builder.CreateExtractValue(aggregate, path);
      if (llvm::isa<llvm::UndefValue>(value))
        return;
      llvm::SmallVector<llvm::Value *> indices{llvm::ConstantInt::get(i32, 0)};
      for (unsigned index : path)
        indices.push_back(llvm::ConstantInt::get(i32, index));
      llvm::Value *address =
          builder.CreateInBoundsGEP(type, store->getPointerOperand(), indices);
      uint64_t offset = layout.getIndexedOffsetInType(type, indices);
      builder.CreateAlignedStore(
          value, address, llvm::commonAlignment(store->getAlign(), offset));
    };
    visit(type);
    store->eraseFromParent();
    llvm::RecursivelyDeleteTriviallyDeadInstructions(aggregate);
  }
}

void mlir::switchyard::splitStraightLineBlocks(llvm::Module &module,
                                              unsigned maxInstructions) {
  for (llvm::Function &function : module) {
    if (function.isDeclaration() || !function.hasOptNone())
      continue;
    // Allocations of a constant size move to the entry block first, which
    // is what keeps them static (frame slots) once they are in blocks of
    // their own. The function has no loops: each ran once anyway.
    llvm::BasicBlock &entry = function.getEntryBlock();
    llvm::BasicBlock::iterator slot = entry.getFirstNonPHIOrDbgOrAlloca();
    for (llvm::BasicBlock &block : function)
      for (llvm::Instruction &instruction : llvm::make_early_inc_range(
               &block == &entry ? llvm::make_range(slot, block.end())
                                : llvm::make_range(block.begin(), block.end())))
        if (auto *alloca = llvm::dyn_cast<llvm::AllocaInst>(&instruction))
          if (llvm::isa<llvm::ConstantInt>(alloca->getArraySize()))
            alloca->moveBefore(slot);
    // The cuts are made from the block's end: a cut moves what follows it
    // to a new block, one instruction at a time.
    llvm::SmallVector<llvm::BasicBlock *> blocks =
        llvm::to_vector(llvm::make_pointer_range(function));
    for (llvm::BasicBlock *block : blocks) {
      llvm::SmallVector<llvm::Instruction *> cuts;
      unsigned count = 0;
      for (llvm::Instruction &instruction :
           llvm::make_range(block->getFirstNonPHIOrDbgOrAlloca(), block->end()))
        if (++count > maxInstructions && !instruction.isTerminator()) {
          cuts.push_back(&instruction);
          count = 1;
        }
      for (llvm::Instruction *cut : llvm::reverse(cuts))
        llvm::SplitBlock(block, cut);
    }
  }
}

namespace {

/// Keeps, of each value's attributes, those of the `llvm` dialect (by name:
/// other dialects may not be loaded); null if none is left.
void keepLLVMAttributesOnly(mlir::ArrayAttr &perValue) {
  if (!perValue)
    return;
  llvm::SmallVector<mlir::Attribute> dictionaries;
  bool any = false;
  for (mlir::Attribute attributes : perValue) {
    llvm::SmallVector<mlir::NamedAttribute> kept;
    for (mlir::NamedAttribute attribute :
         llvm::cast<mlir::DictionaryAttr>(attributes))
      if (attribute.getName().strref().starts_with("llvm."))
        kept.push_back(attribute);
    any |= !kept.empty();
    dictionaries.push_back(
        mlir::DictionaryAttr::get(perValue.getContext(), kept));
  }
  perValue = any ? mlir::ArrayAttr::get(perValue.getContext(), dictionaries)
                 : mlir::ArrayAttr();
}

} // namespace

void mlir::switchyard::prepareForExecutionEngine(mlir::ModuleOp module) {
  constexpr llvm::StringRef prefix = "_mlir_ciface_";
  llvm::StringSet<> targets;
  for (auto function : module.getOps<mlir::LLVM::LLVMFuncOp>())
    if (!function.isExternal() && function.getName().starts_with(prefix))
      targets.insert(function.getName().drop_front(prefix.size()));
  for (auto function : module.getOps<mlir::LLVM::LLVMFuncOp>()) {
    if (!function.isExternal() && targets.contains(function.getName())) {
      function.setLinkage(mlir::LLVM::Linkage::Internal);
      // Inlined only where its wrapper is its one caller: a function that
      // other code calls too (a training step calls its gradient function)
      // would be copied into each caller.
      std::optional<mlir::SymbolTable::UseRange> uses =
          mlir::SymbolTable::getSymbolUses(function, module);
      bool wrapperOnly =
          uses && std::distance(uses->begin(), uses->end()) == 1;
      if (mlir::ArrayAttr passthrough = function.getPassthroughAttr();
          passthrough && wrapperOnly) {
        llvm::SmallVector<mlir::Attribute> kept;
        for (mlir::Attribute attribute : passthrough) {
          auto name = llvm::dyn_cast<mlir::StringAttr>(attribute);
          if (!name || (name.getValue() != "noinline" &&
                        name.getValue() != "optnone"))
            kept.push_back(attribute);
        }
        if (kept.size() != passthrough.size()) {
          function.setPassthroughAttr(
              mlir::ArrayAttr::get(function.getContext(), kept));
          function.setAlwaysInline(true);
        }
      }
    }
    mlir::ArrayAttr arguments = function.getArgAttrsAttr();
    keepLLVMAttributesOnly(arguments);
    function.setArgAttrsAttr(arguments);
    mlir::ArrayAttr results = function.getResAttrsAttr();
    keepLLVMAttributesOnly(results);
    function.setResAttrsAttr(results);
  }
}

namespace {

/// The functions of the structor list `name` in the order they run
/// (ascending priority, then list order); the list is erased.
std::vector<std::string> takeStructorList(llvm::Module &module,
                                          llvm::StringRef name) {
  llvm::GlobalVariable *list = module.getGlobalVariable(name);
  if (!list)
    return {};
  std::vector<std::pair<uint64_t, std::string>> entries;
  if (auto *array = llvm::dyn_cast_or_null<llvm::ConstantArray>(
          list->hasInitializer() ? list->getInitializer() : nullptr)) {
    for (llvm::Value *element : array->operands()) {
      auto *entry = llvm::dyn_cast<llvm::ConstantStruct>(element);
      if (!entry || entry->getNumOperands() < 2)
        continue;
      auto *priority = llvm::dyn_cast<llvm::ConstantInt>(entry->getOperand(0));
      auto *function = llvm::dyn_cast<llvm::Function>(
          entry->getOperand(1)->stripPointerCasts());
      if (!priority || !function)
        continue;
      // Looked up by name later: external, and kept.
      function->setLinkage(llvm::GlobalValue::ExternalLinkage);
      function->setVisibility(llvm::GlobalValue::DefaultVisibility);
      entries.emplace_back(priority->getZExtValue(), function->getName().str());
    }
  }
  list->eraseFromParent();
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  std::vector<std::string> names;
  for (auto &[priority, function] : entries)
    names.push_back(std::move(function));
  return names;
}

} // namespace

mlir::switchyard::Structors
mlir::switchyard::detachStructors(llvm::Module &module) {
  Structors structors;
  structors.constructors = takeStructorList(module, "llvm.global_ctors");
  structors.destructors = takeStructorList(module, "llvm.global_dtors");
  // Destructors run in the reverse order of their priorities.
  std::reverse(structors.destructors.begin(), structors.destructors.end());
  return structors;
}

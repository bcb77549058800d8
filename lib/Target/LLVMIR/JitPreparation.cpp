//===- JitPreparation.cpp - readying compiled modules for the JIT ---------===//
//
// The rewrites between Switchyard's LLVM-dialect output and the JIT's code
// generation: the entry points' linkage and attributes in the LLVM dialect;
// on the translated LLVM IR, the packed entry points, and, so that -O0
// instruction selection (FastISel) handles the straight lines itself,
// block calls through frames, aggregates stored and read by field, and
// blocks cut short.
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

namespace {

/// The GEP indices of the field at `path` of an aggregate in memory:
/// `0, path...`, as i32 constants.
llvm::SmallVector<llvm::Value *> fieldIndices(llvm::LLVMContext &context,
                                              llvm::ArrayRef<unsigned> path) {
  llvm::Type *i32 = llvm::Type::getInt32Ty(context);
  llvm::SmallVector<llvm::Value *> indices{llvm::ConstantInt::get(i32, 0)};
  for (unsigned index : path)
    indices.push_back(llvm::ConstantInt::get(i32, index));
  return indices;
}

} // namespace

void mlir::switchyard::storeAggregatesByField(llvm::Module &module) {
  llvm::SmallVector<llvm::StoreInst *> stores;
  for (llvm::Function &function : module)
    for (llvm::Instruction &instruction : llvm::instructions(function))
      if (auto *store = llvm::dyn_cast<llvm::StoreInst>(&instruction))
        if (store->getValueOperand()->getType()->isAggregateType() &&
            store->isSimple())
          stores.push_back(store);
  const llvm::DataLayout &layout = module.getDataLayout();
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
      llvm::SmallVector<llvm::Value *> indices =
          fieldIndices(module.getContext(), path);
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

void mlir::switchyard::addPackedEntryPoints(llvm::Module &module) {
  constexpr llvm::StringLiteral prefix = "_mlir_ciface_";
  llvm::SmallVector<llvm::Function *> interfaces;
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && function.getName().starts_with(prefix))
      interfaces.push_back(&function);
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *pointer = llvm::PointerType::getUnqual(context);
  for (llvm::Function *function : interfaces) {
    llvm::Function *packed = llvm::Function::Create(
        llvm::FunctionType::get(llvm::Type::getVoidTy(context), {pointer},
                                /*isVarArg=*/false),
        llvm::GlobalValue::ExternalLinkage, "_mlir_" + function->getName(),
        module);
    llvm::IRBuilder<> builder(
        llvm::BasicBlock::Create(context, "entry", packed));
    llvm::Value *slots = packed->getArg(0);
    auto slot = [&](unsigned index) {
      return builder.CreateLoad(
          pointer, builder.CreateConstInBoundsGEP1_64(pointer, slots, index));
    };
    llvm::SmallVector<llvm::Value *> arguments;
    for (llvm::Argument &argument : function->args())
      arguments.push_back(
          builder.CreateLoad(argument.getType(), slot(argument.getArgNo())));
    llvm::CallInst *call = builder.CreateCall(function, arguments);
    if (!call->getType()->isVoidTy())
      builder.CreateStore(call, slot(function->arg_size()));
    builder.CreateRetVoid();
  }
}

namespace {

/// Whether every use of `function` calls it directly, with its own type.
bool onlyCalledDirectly(llvm::Function &function) {
  for (llvm::Use &use : function.uses()) {
    auto *call = llvm::dyn_cast<llvm::CallInst>(use.getUser());
    if (!call || !call->isCallee(&use) ||
        call->getFunctionType() != function.getFunctionType())
      return false;
  }
  return true;
}

/// The frame of `call`'s function for calls through frames of
/// `frameType`: one per function (the calls do not overlap), allocated in
/// its entry block.
llvm::AllocaInst *
callerFrame(llvm::DenseMap<llvm::Function *, llvm::AllocaInst *> &frames,
            llvm::CallInst &call, llvm::StructType *frameType) {
  llvm::Function *caller = call.getFunction();
  llvm::AllocaInst *&frame = frames[caller];
  if (!frame) {
    llvm::IRBuilder<> entry(&*caller->getEntryBlock().getFirstInsertionPt());
    frame = entry.CreateAlloca(frameType);
  }
  return frame;
}

} // namespace

void mlir::switchyard::dispatchParallelLoops(llvm::Module &module,
                                            llvm::StringRef attribute,
                                            llvm::StringRef runtimeFunction) {
  llvm::SmallVector<std::pair<llvm::Function *, int64_t>> nests;
  for (llvm::Function &function : module) {
    if (function.isDeclaration() || function.arg_size() < 2 ||
        !function.hasFnAttribute(attribute))
      continue;
    int64_t step = 0;
    if (function.getFnAttribute(attribute).getValueAsString().getAsInteger(
            10, step) ||
        step <= 0)
      continue;
    nests.emplace_back(&function, step);
  }
  if (nests.empty())
    return;
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *pointer = llvm::PointerType::getUnqual(context);
  llvm::Type *i64 = llvm::Type::getInt64Ty(context);
  llvm::Type *voidType = llvm::Type::getVoidTy(context);
  llvm::FunctionCallee parallelFor = module.getOrInsertFunction(
      runtimeFunction, voidType, pointer, pointer, i64, i64, i64);
  for (auto [function, step] : nests) {
    if (!onlyCalledDirectly(*function) ||
        !function->getArg(0)->getType()->isIntegerTy(64) ||
        !function->getArg(1)->getType()->isIntegerTy(64))
      continue;
    // The captured arguments (all but the bounds) in a frame.
    llvm::SmallVector<llvm::Type *> fields;
    for (llvm::Argument &argument : llvm::drop_begin(function->args(), 2))
      fields.push_back(argument.getType());
    llvm::StructType *frameType = llvm::StructType::get(context, fields);
    auto field = [&](llvm::IRBuilder<> &builder, llvm::Value *frame,
                     unsigned index) {
      return builder.CreateStructGEP(frameType, frame, index);
    };

    // task(frame, begin, end) runs the iterations from begin to end.
    llvm::Function *task = llvm::Function::Create(
        llvm::FunctionType::get(voidType, {pointer, i64, i64}, false),
        llvm::GlobalValue::InternalLinkage, function->getName() + ".task",
        module);
    {
      llvm::IRBuilder<> builder(
          llvm::BasicBlock::Create(context, "entry", task));
      llvm::SmallVector<llvm::Value *> arguments{task->getArg(1),
                                                 task->getArg(2)};
      for (auto [index, type] : llvm::enumerate(fields))
        arguments.push_back(
            builder.CreateLoad(type, field(builder, task->getArg(0), index)));
      builder.CreateCall(function, arguments);
      builder.CreateRetVoid();
    }

    llvm::DenseMap<llvm::Function *, llvm::AllocaInst *> frames;
    for (llvm::User *user : llvm::make_early_inc_range(function->users())) {
      auto *call = llvm::cast<llvm::CallInst>(user);
      if (call->getFunction() == task)
        continue;
      llvm::AllocaInst *frame = callerFrame(frames, *call, frameType);
      llvm::IRBuilder<> builder(call);
      for (unsigned index = 2; index < call->arg_size(); ++index)
        builder.CreateStore(call->getArgOperand(index),
                            field(builder, frame, index - 2));
      builder.CreateCall(parallelFor,
                         {task, frame, call->getArgOperand(0),
                          call->getArgOperand(1),
                          llvm::ConstantInt::get(i64, step)});
      call->eraseFromParent();
    }
  }
}

void mlir::switchyard::passArgumentsInMemory(llvm::Module &module,
                                            unsigned maxArguments) {
  llvm::SmallVector<llvm::Function *> functions;
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && function.hasLocalLinkage() &&
        function.hasOptNone() && !function.isVarArg() &&
        (function.getReturnType()->isAggregateType() ||
         function.arg_size() > maxArguments) &&
        onlyCalledDirectly(function))
      functions.push_back(&function);
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *pointer = llvm::PointerType::getUnqual(context);
  for (llvm::Function *function : functions) {
    // The frame: the arguments, then the result.
    llvm::SmallVector<llvm::Type *> fields(function->getFunctionType()->params());
    llvm::Type *result = function->getReturnType();
    unsigned resultField = fields.size();
    if (!result->isVoidTy())
      fields.push_back(result);
    llvm::StructType *frameType = llvm::StructType::get(context, fields);
    auto field = [&](llvm::IRBuilder<> &builder, llvm::Value *frame,
                     unsigned index) {
      return builder.CreateStructGEP(frameType, frame, index);
    };

    // The function, taking its frame.
    llvm::Function *packed = llvm::Function::Create(
        llvm::FunctionType::get(llvm::Type::getVoidTy(context), {pointer},
                                /*isVarArg=*/false),
        function->getLinkage(), function->getAddressSpace(), "", &module);
    packed->takeName(function);
    packed->setAttributes(llvm::AttributeList::get(
        context, llvm::AttributeList::FunctionIndex,
        function->getAttributes().getFnAttrs()));
    packed->splice(packed->begin(), function);
    llvm::Value *frame = packed->getArg(0);
    {
      llvm::IRBuilder<> builder(&*packed->getEntryBlock().getFirstInsertionPt());
      for (llvm::Argument &argument : function->args())
        argument.replaceAllUsesWith(builder.CreateLoad(
            argument.getType(), field(builder, frame, argument.getArgNo())));
    }
    for (llvm::BasicBlock &block : *packed)
      if (auto *ret = llvm::dyn_cast<llvm::ReturnInst>(block.getTerminator())) {
        llvm::IRBuilder<> builder(ret);
        if (llvm::Value *value = ret->getReturnValue())
          builder.CreateStore(value, field(builder, frame, resultField));
        builder.CreateRetVoid();
        ret->eraseFromParent();
      }

    // Each call, through one frame per calling function.
    llvm::DenseMap<llvm::Function *, llvm::AllocaInst *> frames;
    for (llvm::User *user : llvm::make_early_inc_range(function->users())) {
      auto *call = llvm::cast<llvm::CallInst>(user);
      llvm::AllocaInst *callFrame = callerFrame(frames, *call, frameType);
      llvm::IRBuilder<> builder(call);
      for (auto [index, argument] : llvm::enumerate(call->args()))
        builder.CreateStore(argument, field(builder, callFrame, index));
      llvm::CallInst *packedCall = builder.CreateCall(packed, {callFrame});
      packedCall->setCallingConv(call->getCallingConv());
      if (!result->isVoidTy()) {
        builder.SetInsertPoint(packedCall->getNextNode());
        call->replaceAllUsesWith(builder.CreateLoad(
            result, field(builder, callFrame, resultField)));
      }
      call->eraseFromParent();
    }
    function->eraseFromParent();
  }
}

namespace {

/// The scalar field at `indices` of `aggregate`, found through the
/// insertvalue and extractvalue chains that built it, or loaded on its own
/// where the aggregate is a load (from the same memory, just before it);
/// null where neither gives it.
llvm::Value *scalarField(llvm::Value *aggregate,
                         llvm::SmallVector<unsigned> indices) {
  for (;;) {
    if (auto *insert = llvm::dyn_cast<llvm::InsertValueInst>(aggregate)) {
      llvm::ArrayRef<unsigned> at = insert->getIndices();
      size_t common = std::min(at.size(), indices.size());
      if (!llvm::equal(at.take_front(common),
                       llvm::ArrayRef(indices).take_front(common))) {
        aggregate = insert->getAggregateOperand();
        continue;
      }
      // The field is inside what was inserted (the scalar itself where the
      // paths are equal: a scalar has no fields of its own).
      aggregate = insert->getInsertedValueOperand();
      indices.erase(indices.begin(), indices.begin() + at.size());
      if (indices.empty())
        return aggregate;
      continue;
    }
    if (auto *extract = llvm::dyn_cast<llvm::ExtractValueInst>(aggregate)) {
      indices.insert(indices.begin(), extract->idx_begin(), extract->idx_end());
      aggregate = extract->getAggregateOperand();
      continue;
    }
    if (auto *load = llvm::dyn_cast<llvm::LoadInst>(aggregate);
        load && load->isSimple() && !indices.empty()) {
      llvm::IRBuilder<> builder(load);
      return builder.CreateLoad(
          llvm::ExtractValueInst::getIndexedType(load->getType(), indices),
          builder.CreateInBoundsGEP(load->getType(), load->getPointerOperand(),
                                    fieldIndices(load->getContext(), indices)));
    }
    if (llvm::isa<llvm::UndefValue>(aggregate) && !indices.empty())
      return llvm::PoisonValue::get(
          llvm::ExtractValueInst::getIndexedType(aggregate->getType(), indices));
    return nullptr;
  }
}

} // namespace

void mlir::switchyard::readAggregatesByField(llvm::Module &module) {
  for (llvm::Function &function : module) {
    if (function.isDeclaration() || !function.hasOptNone())
      continue;
    for (llvm::Instruction &instruction :
         llvm::make_early_inc_range(llvm::instructions(function))) {
      auto *extract = llvm::dyn_cast<llvm::ExtractValueInst>(&instruction);
      if (!extract || extract->getType()->isAggregateType())
        continue;
      if (llvm::Value *field =
              scalarField(extract->getAggregateOperand(),
                          llvm::to_vector(extract->getIndices())))
        extract->replaceAllUsesWith(field);
    }
    // The extracts, and what built or read the aggregates, are dead now
    // unless something else uses them.
    llvm::SmallVector<llvm::Instruction *> dead;
    for (llvm::Instruction &instruction : llvm::instructions(function))
      if (llvm::isa<llvm::ExtractValueInst>(instruction) ||
          (llvm::isa<llvm::InsertValueInst, llvm::LoadInst>(instruction) &&
           instruction.getType()->isAggregateType()))
        dead.push_back(&instruction);
    for (llvm::Instruction *instruction : llvm::reverse(dead))
      if (llvm::isInstructionTriviallyDead(instruction))
        instruction->eraseFromParent();
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

void mlir::switchyard::prepareForJit(mlir::ModuleOp module) {
  constexpr llvm::StringRef prefix = "_mlir_ciface_";
  llvm::StringSet<> targets;
  for (auto function : module.getOps<mlir::LLVM::LLVMFuncOp>())
    if (!function.isExternal() && function.getName().starts_with(prefix))
      targets.insert(function.getName().drop_front(prefix.size()));
  // Run by name, not through a C interface.
  llvm::StringSet<> structors;
  auto addStructors = [&](mlir::ArrayAttr symbols) {
    for (auto symbol : symbols.getAsRange<mlir::FlatSymbolRefAttr>())
      structors.insert(symbol.getValue());
  };
  for (auto list : module.getOps<mlir::LLVM::GlobalCtorsOp>())
    addStructors(list.getCtors());
  for (auto list : module.getOps<mlir::LLVM::GlobalDtorsOp>())
    addStructors(list.getDtors());
  for (auto function : module.getOps<mlir::LLVM::LLVMFuncOp>()) {
    if (!function.isExternal() && !function.getName().starts_with(prefix) &&
        !structors.contains(function.getName()))
      function.setLinkage(mlir::LLVM::Linkage::Internal);
    if (!function.isExternal() && targets.contains(function.getName())) {
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

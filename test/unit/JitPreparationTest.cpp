//===- JitPreparationTest.cpp - readying a module for the JIT --------===//
//
// mlir::switchyard::prepareForJit, on a module in the LLVM
// dialect shaped like the CPU pipeline's output: every definition but the C
// interfaces and constructors becomes internal (the function behind a C
// interface, when switchyard-cpu-outline-loops made it optnone,
// always-inline instead); argument and result attributes of other dialects
// go, the llvm dialect's stay. On LLVM IR: structors detached in order;
// stores of aggregates split by field (storeAggregatesByField), reads of
// them too (readAggregatesByField); block calls through frames
// (passArgumentsInMemory), run with ORC to check they compute the same;
// optnone functions cut into short blocks (splitStraightLineBlocks).
//
//===----------------------------------------------------------------------===//

#include "lib/Target/LLVMIR/JitPreparation.h"
#include "runtime/ComputeThreads.h"
#include "test/unit/TestSupport.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/AsmParser/Parser.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include "gtest/gtest.h"

using namespace mlir;
using ::switchyard::test::parseLLVM;

namespace {

constexpr const char *kModule = R"mlir(
  llvm.func @step(%a: !llvm.ptr {lm.param = "w", llvm.noalias}, %n: i64 {lm.vocab = 256 : i64}) -> (i64 {lm.hyper})
      attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]} {
    llvm.return %n : i64
  }
  llvm.func @_mlir_ciface_step(%a: !llvm.ptr {lm.param = "w"}, %n: i64) -> i64
      attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]} {
    %r = llvm.call @step(%a, %n) : (!llvm.ptr, i64) -> i64
    llvm.return %r : i64
  }
  llvm.func @plain(%a: !llvm.ptr) attributes {passthrough = ["noimplicitfloat"]} {
    llvm.return
  }
  llvm.func @_mlir_ciface_plain(%a: !llvm.ptr) {
    llvm.call @plain(%a) : (!llvm.ptr) -> ()
    llvm.return
  }
  llvm.func @helper(%a: i64) -> i64 {
    llvm.return %a : i64
  }
  llvm.func @external(!llvm.ptr)
  llvm.mlir.global_ctors ctors = [@load_kernels], priorities = [0 : i32], data = [#llvm.zero]
  llvm.func @load_kernels() {
    llvm.return
  }
  llvm.func @grad(%a: !llvm.ptr) attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]} {
    llvm.return
  }
  llvm.func @_mlir_ciface_grad(%a: !llvm.ptr) attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]} {
    llvm.call @grad(%a) : (!llvm.ptr) -> ()
    llvm.return
  }
  llvm.func @train_step(%a: !llvm.ptr) attributes {passthrough = ["noinline", "optnone", "noimplicitfloat"]} {
    llvm.call @grad(%a) : (!llvm.ptr) -> ()
    llvm.return
  }
)mlir";

TEST(JitPreparationTest, InternalizesCInterfaceTargetsAndDropsForeignAttributes) {
  MLIRContext context;
  context.loadDialect<LLVM::LLVMDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  ASSERT_TRUE(module);

  mlir::switchyard::prepareForJit(*module);
  auto function = [&](StringRef name) {
    return module->lookupSymbol<LLVM::LLVMFuncOp>(name);
  };

  // The marked entry point: internal, inlined into its wrapper instead of
  // optnone; its other passthrough attributes stay.
  LLVM::LLVMFuncOp step = function("step");
  EXPECT_EQ(step.getLinkage(), LLVM::Linkage::Internal);
  EXPECT_TRUE(step.getAlwaysInline());
  ASSERT_TRUE(step.getPassthroughAttr());
  ASSERT_EQ(step.getPassthroughAttr().size(), 1u);
  EXPECT_EQ(cast<StringAttr>(step.getPassthroughAttr()[0]).getValue(),
            "noimplicitfloat");
  // lm.* attributes are gone, llvm.noalias stays; a result with none left
  // has no attributes.
  EXPECT_FALSE(step.getArgAttr(0, "lm.param"));
  EXPECT_TRUE(step.getArgAttr(0, "llvm.noalias"));
  EXPECT_FALSE(step.getArgAttr(1, "lm.vocab"));
  EXPECT_FALSE(step.getResAttrsAttr());

  // The wrapper keeps its linkage and its optnone.
  LLVM::LLVMFuncOp wrapper = function("_mlir_ciface_step");
  EXPECT_EQ(wrapper.getLinkage(), LLVM::Linkage::External);
  EXPECT_FALSE(wrapper.getAlwaysInline());
  EXPECT_EQ(wrapper.getPassthroughAttr().size(), 3u);
  EXPECT_FALSE(wrapper.getArgAttrsAttr());

  // A target that is not optnone becomes internal and nothing else.
  LLVM::LLVMFuncOp plain = function("plain");
  EXPECT_EQ(plain.getLinkage(), LLVM::Linkage::Internal);
  EXPECT_FALSE(plain.getAlwaysInline());
  EXPECT_EQ(plain.getPassthroughAttr().size(), 1u);

  // Every other definition becomes internal (the runtime calls C
  // interfaces only; ExecutionEngine would give a public one a packed
  // wrapper), but for the global constructors, run by name; declarations
  // stay external.
  EXPECT_EQ(function("helper").getLinkage(), LLVM::Linkage::Internal);
  EXPECT_EQ(function("train_step").getLinkage(), LLVM::Linkage::Internal);
  EXPECT_EQ(function("load_kernels").getLinkage(), LLVM::Linkage::External);
  EXPECT_EQ(function("external").getLinkage(), LLVM::Linkage::External);

  // An entry point that other code calls too (a training step calls its
  // gradient function) stays a function of its own, optnone.
  LLVM::LLVMFuncOp grad = function("grad");
  EXPECT_EQ(grad.getLinkage(), LLVM::Linkage::Internal);
  EXPECT_FALSE(grad.getAlwaysInline());
  EXPECT_EQ(grad.getPassthroughAttr().size(), 3u);
  EXPECT_EQ(function("external").getLinkage(), LLVM::Linkage::External);
  EXPECT_TRUE(succeeded(mlir::verify(*module)));
}

// A C interface's results, built field by field and stored as one value
// (what an inlined entry point leaves), and an aggregate loaded whole.
constexpr const char *kAggregateStores = R"ll(
  define void @results(ptr %out, ptr %a, i64 %n) {
    %s0 = insertvalue { ptr, i64, [2 x i64] } poison, ptr %a, 0
    %s1 = insertvalue { ptr, i64, [2 x i64] } %s0, i64 %n, 1
    %s2 = insertvalue { ptr, i64, [2 x i64] } %s1, i64 7, 2, 1
    store { ptr, i64, [2 x i64] } %s2, ptr %out, align 8
    ret void
  }
  define void @copy(ptr %to, ptr %from) {
    %v = load [2 x { i32, float }], ptr %from, align 4
    store [2 x { i32, float }] %v, ptr %to, align 4
    ret void
  }
)ll";

// The GPU host code's kernel module loads and unloads, as the GPU
// dialect's translation registers them (internal functions).
constexpr const char *kStructors = R"ll(
  @llvm.global_ctors = appending global [2 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 200, ptr @late_load, ptr null }, { i32, ptr, ptr } { i32 123, ptr @early_load, ptr null }]
  @llvm.global_dtors = appending global [2 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 123, ptr @early_unload, ptr null }, { i32, ptr, ptr } { i32 200, ptr @late_unload, ptr null }]
  define internal void @early_load() { ret void }
  define internal void @late_load() { ret void }
  define internal void @early_unload() { ret void }
  define internal void @late_unload() { ret void }
)ll";

TEST(JitPreparationTest, DetachesConstructorsAndDestructorsInTheirOrder) {
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = parseLLVM(kStructors, context);
  ASSERT_TRUE(module);
  mlir::switchyard::Structors structors =
      mlir::switchyard::detachStructors(*module);
  // Constructors by ascending priority, destructors by descending.
  EXPECT_EQ(structors.constructors,
            (std::vector<std::string>{"early_load", "late_load"}));
  EXPECT_EQ(structors.destructors,
            (std::vector<std::string>{"late_unload", "early_unload"}));
  // The lists are gone (nothing else runs them); the functions are
  // external, to be looked up by name.
  EXPECT_FALSE(module->getGlobalVariable("llvm.global_ctors"));
  EXPECT_FALSE(module->getGlobalVariable("llvm.global_dtors"));
  for (const char *name :
       {"early_load", "late_load", "early_unload", "late_unload"})
    EXPECT_TRUE(module->getFunction(name)->hasExternalLinkage()) << name;
  EXPECT_FALSE(llvm::verifyModule(*module, &llvm::errs()));
}

TEST(JitPreparationTest, StoresAggregatesFieldByField) {
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = parseLLVM(kAggregateStores, context);
  ASSERT_TRUE(module);

  mlir::switchyard::storeAggregatesByField(*module);
  EXPECT_FALSE(llvm::verifyModule(*module, &llvm::errs()));

  // Each function's stores: (offset from the destination, stored value).
  auto stores = [&](llvm::StringRef name) {
    std::vector<std::pair<int64_t, llvm::Value *>> result;
    llvm::Function *function = module->getFunction(name);
    for (llvm::Instruction &instruction : llvm::instructions(*function)) {
      EXPECT_FALSE(llvm::isa<llvm::InsertValueInst>(instruction))
          << "an insertvalue is left";
      auto *store = llvm::dyn_cast<llvm::StoreInst>(&instruction);
      if (!store)
        continue;
      EXPECT_FALSE(store->getValueOperand()->getType()->isAggregateType());
      llvm::APInt offset(64, 0);
      llvm::Value *base =
          store->getPointerOperand()->stripAndAccumulateConstantOffsets(
              module->getDataLayout(), offset, /*AllowNonInbounds=*/false);
      EXPECT_EQ(base, function->getArg(0));
      result.emplace_back(offset.getSExtValue(), store->getValueOperand());
    }
    return result;
  };

  // The inserted values themselves, at their offsets; the poison field
  // (element 0 of the array) is not stored; the insertvalue chain is gone.
  llvm::Function *results = module->getFunction("results");
  auto resultStores = stores("results");
  ASSERT_EQ(resultStores.size(), 3u);
  EXPECT_EQ(resultStores[0],
            std::make_pair(int64_t(0), (llvm::Value *)results->getArg(1)));
  EXPECT_EQ(resultStores[1],
            std::make_pair(int64_t(8), (llvm::Value *)results->getArg(2)));
  EXPECT_EQ(resultStores[2].first, 24);
  auto *seven = llvm::dyn_cast<llvm::ConstantInt>(resultStores[2].second);
  ASSERT_TRUE(seven);
  EXPECT_EQ(seven->getSExtValue(), 7);

  // A loaded aggregate: each field extracted from the load, all four
  // stored, with the destination's alignment where the offset keeps it.
  auto copyStores = stores("copy");
  ASSERT_EQ(copyStores.size(), 4u);
  for (auto [index, store] : llvm::enumerate(copyStores)) {
    EXPECT_EQ(store.first, int64_t(4 * index));
    EXPECT_TRUE(llvm::isa<llvm::ExtractValueInst>(store.second));
  }
}

/// Runs `name`, a `void (ptr, i64, ptr)` of `module`, with LLVM's JIT
/// (the runtime's switchyardParallelFor resolved).
void runFunction(std::unique_ptr<llvm::Module> module,
                 std::unique_ptr<llvm::LLVMContext> context,
                 llvm::StringRef name, void *a, int64_t n, int64_t *out) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> jit =
      llvm::orc::LLJITBuilder().create();
  ASSERT_TRUE(bool(jit)) << llvm::toString(jit.takeError());
  llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(),
                                      (*jit)->getDataLayout());
  llvm::orc::SymbolMap runtime;
  runtime[mangle("switchyardParallelFor")] = {
      llvm::orc::ExecutorAddr::fromPtr(
          &::switchyard::runtime::switchyardParallelFor),
      llvm::JITSymbolFlags::Exported};
  llvm::cantFail((*jit)->getMainJITDylib().define(
      llvm::orc::absoluteSymbols(std::move(runtime))));
  llvm::cantFail((*jit)->addIRModule(
      llvm::orc::ThreadSafeModule(std::move(module), std::move(context))));
  llvm::Expected<llvm::orc::ExecutorAddr> address = (*jit)->lookup(name);
  ASSERT_TRUE(bool(address)) << llvm::toString(address.takeError());
  address->toPtr<void (*)(void *, int64_t, int64_t *)>()(a, n, out);
}

// A layer block (optnone) called twice from a straight line: it takes more
// than two arguments and returns an aggregate, built with insertvalue; a
// small function that does neither; the caller extracts fields of the results,
// the second call's arguments among them.
constexpr const char *kBlockCalls = R"ll(
  define internal { ptr, i64 } @block(ptr %a, i64 %n, i64 %k) #0 {
    %p = getelementptr i8, ptr %a, i64 8
    %m = mul i64 %n, %k
    %r0 = insertvalue { ptr, i64 } poison, ptr %p, 0
    %r1 = insertvalue { ptr, i64 } %r0, i64 %m, 1
    ret { ptr, i64 } %r1
  }
  define internal i64 @small(i64 %n) {
    %m = add i64 %n, 1
    ret i64 %m
  }
  define void @caller(ptr %a, i64 %n, ptr %out) #0 {
    %r = call { ptr, i64 } @block(ptr %a, i64 %n, i64 3)
    %p = extractvalue { ptr, i64 } %r, 0
    %m = extractvalue { ptr, i64 } %r, 1
    %s = call { ptr, i64 } @block(ptr %p, i64 %m, i64 4)
    %q = extractvalue { ptr, i64 } %s, 0
    %t = extractvalue { ptr, i64 } %s, 1
    %u = call i64 @small(i64 %t)
    store i64 %u, ptr %out
    %out1 = getelementptr i64, ptr %out, i64 1
    store ptr %q, ptr %out1
    ret void
  }
  attributes #0 = { noinline optnone }
)ll";

TEST(JitPreparationTest, PassesLongArgumentListsAndAggregatesInMemory) {
  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = parseLLVM(kBlockCalls, *context);
  ASSERT_TRUE(module);

  mlir::switchyard::passArgumentsInMemory(*module, /*maxArguments=*/2);
  ASSERT_FALSE(llvm::verifyModule(*module, &llvm::errs()));

  // The block takes its frame; the small function is as it was.
  llvm::Function *block = module->getFunction("block");
  ASSERT_TRUE(block);
  EXPECT_TRUE(block->getReturnType()->isVoidTy());
  ASSERT_EQ(block->arg_size(), 1u);
  EXPECT_TRUE(block->getArg(0)->getType()->isPointerTy());
  EXPECT_EQ(module->getFunction("small")->arg_size(), 1u);
  // Both calls pass the caller's one frame, which nothing else gets.
  llvm::Function *caller = module->getFunction("caller");
  llvm::SmallVector<llvm::AllocaInst *> frames;
  llvm::SmallVector<llvm::CallInst *> blockCalls;
  for (llvm::Instruction &instruction : llvm::instructions(*caller)) {
    if (auto *alloca = llvm::dyn_cast<llvm::AllocaInst>(&instruction))
      frames.push_back(alloca);
    if (auto *call = llvm::dyn_cast<llvm::CallInst>(&instruction))
      if (call->getCalledFunction() == block)
        blockCalls.push_back(call);
  }
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_EQ(blockCalls.size(), 2u);
  for (llvm::CallInst *call : blockCalls)
    EXPECT_EQ(call->getArgOperand(0), frames.front());

  // It computes what it did: out = {3 * 4 * n + 1, a + 16}.
  int64_t out[2] = {0, 0};
  char bytes[32];
  runFunction(std::move(module), std::move(context), "caller", bytes, 5, out);
  EXPECT_EQ(out[0], 61);
  EXPECT_EQ(reinterpret_cast<char *>(out[1]), bytes + 16);
}

// A C interface's reads: descriptors loaded whole, a descriptor rebuilt
// with insertvalue (one field changed), fields extracted from both, in a
// straight line and in a function that is optimised.
constexpr const char *kAggregateReads = R"ll(
  define void @line(ptr %a, i64 %n, ptr %out) #0 {
    %d = load { ptr, i64, [2 x i64] }, ptr %a, align 8
    %e = insertvalue { ptr, i64, [2 x i64] } %d, i64 %n, 2, 1
    %size = extractvalue { ptr, i64, [2 x i64] } %e, 2
    %s0 = extractvalue [2 x i64] %size, 0
    %s1 = extractvalue [2 x i64] %size, 1
    %offset = extractvalue { ptr, i64, [2 x i64] } %d, 1
    %sum = add i64 %s0, %s1
    %total = add i64 %sum, %offset
    store i64 %total, ptr %out
    ret void
  }
  define void @optimised(ptr %a, i64 %n, ptr %out) {
    %d = load { ptr, i64, [2 x i64] }, ptr %a, align 8
    %offset = extractvalue { ptr, i64, [2 x i64] } %d, 1
    store i64 %offset, ptr %out
    ret void
  }
  attributes #0 = { noinline optnone }
)ll";

TEST(JitPreparationTest, ReadsAggregatesFieldByField) {
  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = parseLLVM(kAggregateReads, *context);
  ASSERT_TRUE(module);

  mlir::switchyard::readAggregatesByField(*module);
  ASSERT_FALSE(llvm::verifyModule(*module, &llvm::errs()));

  // No aggregate is built or loaded in the straight line; the optimised
  // function is left to LLVM's own passes.
  for (llvm::Instruction &instruction :
       llvm::instructions(*module->getFunction("line"))) {
    EXPECT_FALSE(llvm::isa<llvm::InsertValueInst>(instruction) ||
                 llvm::isa<llvm::ExtractValueInst>(instruction))
        << "an aggregate instruction is left";
    if (auto *load = llvm::dyn_cast<llvm::LoadInst>(&instruction))
      EXPECT_FALSE(load->getType()->isAggregateType());
  }
  EXPECT_TRUE(llvm::any_of(
      llvm::instructions(*module->getFunction("optimised")),
      [](llvm::Instruction &instruction) {
        return llvm::isa<llvm::ExtractValueInst>(instruction);
      }));

  // The same sum: size 0 (read) + size 1 (replaced by n) + offset.
  int64_t descriptor[4] = {0, 100, 20, 3000};
  int64_t out[1] = {0};
  runFunction(std::move(module), std::move(context), "line", descriptor, 7,
              out);
  EXPECT_EQ(out[0], 127);
}

// A loop nest over out[lo..hi) by 2 (out[i] = i * k), marked to run in
// parallel, called from a straight line over [1, n), then over [0, 4) with
// k = -1.
constexpr const char *kParallelNest = R"ll(
  define internal void @nest(i64 %lo, i64 %hi, ptr %out, i64 %k) #1 {
  entry:
    %empty = icmp sge i64 %lo, %hi
    br i1 %empty, label %exit, label %body
  body:
    %i = phi i64 [ %lo, %entry ], [ %next, %body ]
    %v = mul i64 %i, %k
    %p = getelementptr i64, ptr %out, i64 %i
    store i64 %v, ptr %p
    %next = add i64 %i, 2
    %done = icmp sge i64 %next, %hi
    br i1 %done, label %exit, label %body
  exit:
    ret void
  }
  define void @caller(ptr %k, i64 %n, ptr %out) #0 {
    %kv = load i64, ptr %k
    call void @nest(i64 1, i64 %n, ptr %out, i64 %kv)
    call void @nest(i64 0, i64 4, ptr %out, i64 -1)
    ret void
  }
  attributes #0 = { noinline optnone }
  attributes #1 = { noinline "switchyard-parallel-for"="2" }
)ll";

TEST(JitPreparationTest, ParallelLoopsRunOnTheComputeThreads) {
  for (unsigned threads : {1u, 2u, 3u}) {
    ::switchyard::runtime::setComputeThreads(threads);
    auto context = std::make_unique<llvm::LLVMContext>();
    std::unique_ptr<llvm::Module> module = parseLLVM(kParallelNest, *context);
    ASSERT_TRUE(module);
    mlir::switchyard::dispatchParallelLoops(*module, "switchyard-parallel-for",
                                            "switchyardParallelFor");
    ASSERT_FALSE(llvm::verifyModule(*module, &llvm::errs()));
    // The caller calls the runtime with the nest's task, not the nest.
    llvm::Function *task = module->getFunction("nest.task");
    ASSERT_TRUE(task);
    unsigned runtimeCalls = 0;
    for (llvm::Instruction &instruction :
         llvm::instructions(*module->getFunction("caller")))
      if (auto *call = llvm::dyn_cast<llvm::CallInst>(&instruction)) {
        EXPECT_NE(call->getCalledFunction(), module->getFunction("nest"));
        if (call->getCalledFunction()->getName() == "switchyardParallelFor") {
          EXPECT_EQ(call->getArgOperand(0), task);
          ++runtimeCalls;
        }
      }
    EXPECT_EQ(runtimeCalls, 2u);

    // Every iteration ran once, whatever the thread count.
    std::vector<int64_t> out(101, 7);
    int64_t k = 3;
    runFunction(std::move(module), std::move(context), "caller", &k, 101,
                out.data());
    for (int64_t i = 0; i < 101; ++i) {
      int64_t expected = i < 4 && i % 2 == 0 ? -i : i % 2 == 1 ? 3 * i : 7;
      EXPECT_EQ(out[i], expected) << "i = " << i << ", threads " << threads;
    }
  }
  ::switchyard::runtime::setComputeThreads(0);
}

// A straight line (optnone) with an allocation after its start, and the
// same code in a function that is optimised.
constexpr const char *kLongBlocks = R"ll(
  declare void @use(ptr, i64)
  define void @line(i64 %n) #0 {
    %a = add i64 %n, 1
    %b = add i64 %a, 2
    call void @use(ptr null, i64 %b)
    %buffer = alloca [4 x i64], align 8
    %c = add i64 %b, 3
    call void @use(ptr %buffer, i64 %c)
    %d = add i64 %c, 4
    call void @use(ptr %buffer, i64 %d)
    ret void
  }
  define void @optimised(i64 %n) {
    %a = add i64 %n, 1
    %b = add i64 %a, 2
    call void @use(ptr null, i64 %b)
    %c = add i64 %b, 3
    call void @use(ptr null, i64 %c)
    ret void
  }
  attributes #0 = { noinline optnone }
)ll";

TEST(JitPreparationTest, SplitsStraightLinesIntoShortBlocks) {
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = parseLLVM(kLongBlocks, context);
  ASSERT_TRUE(module);

  mlir::switchyard::splitStraightLineBlocks(*module, 3);
  EXPECT_FALSE(llvm::verifyModule(*module, &llvm::errs()));

  // At most 3 instructions and a terminator per block, besides the
  // allocation, moved to the entry block; in the order they were written.
  llvm::Function *line = module->getFunction("line");
  std::vector<std::string> order;
  for (llvm::BasicBlock &block : *line) {
    EXPECT_LE(llvm::count_if(block,
                             [](llvm::Instruction &instruction) {
                               return !instruction.isTerminator() &&
                                      !llvm::isa<llvm::AllocaInst>(instruction);
                             }),
              3);
    for (llvm::Instruction &instruction : block) {
      if (llvm::isa<llvm::AllocaInst>(instruction))
        EXPECT_EQ(&block, &line->getEntryBlock());
      if (!llvm::isa<llvm::BranchInst>(instruction))
        order.push_back(instruction.hasName() ? instruction.getName().str()
                                              : instruction.getOpcodeName());
    }
  }
  EXPECT_EQ(line->size(), 3u);
  EXPECT_EQ(order, (std::vector<std::string>{"buffer", "a", "b", "call", "c",
                                             "call", "d", "call", "ret"}));
  // A function that is not optnone keeps its one block.
  EXPECT_EQ(module->getFunction("optimised")->size(), 1u);
}

} // namespace

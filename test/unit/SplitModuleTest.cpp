//===- SplitModuleTest.cpp - a compiled module in parts -------------------===//
//
// mlir::switchyard::splitOffLoopNests: the functions that are not straight
// lines move into parts balanced by size, each part readable on its own
// (bitcode in a fresh context), with its own copy of the constants it reads
// and declarations of the rest; the module keeps the straight lines, every
// global, and declarations of what moved, all linkable by name.
//
//===----------------------------------------------------------------------===//

#include "lib/Target/LLVMIR/SplitModule.h"
#include "test/unit/TestSupport.h"

#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <set>

namespace {

using switchyard::test::parseLLVM;

// Three loop nests of different sizes (one reads a constant table, one a
// mutable counter), called from a straight line, which calls a straight
// line of its own too.
constexpr const char *kModule = R"ll(
  @table = internal constant [4 x i64] [i64 1, i64 2, i64 3, i64 4]
  @counter = internal global i64 0
  define internal i64 @big(i64 %i) {
    %p = getelementptr [4 x i64], ptr @table, i64 0, i64 %i
    %v = load i64, ptr %p
    %a = add i64 %v, 1
    %b = add i64 %a, 2
    %c = add i64 %b, 3
    %d = add i64 %c, 4
    ret i64 %d
  }
  define internal i64 @middle(i64 %i) {
    %v = load i64, ptr @counter
    %a = add i64 %v, %i
    store i64 %a, ptr @counter
    ret i64 %a
  }
  define internal i64 @small(i64 %i) {
    ret i64 %i
  }
  define internal i64 @entry(i64 %i) #0 {
    ret i64 %i
  }
  define i64 @_mlir_ciface_line(i64 %i) #0 {
    %e = call i64 @entry(i64 %i)
    %a = call i64 @big(i64 %e)
    %b = call i64 @middle(i64 %a)
    %c = call i64 @small(i64 %b)
    ret i64 %c
  }
  attributes #0 = { noinline optnone }
)ll";

TEST(SplitModuleTest, LoopNestsMoveIntoBalancedParts) {
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = parseLLVM(kModule, context);
  ASSERT_TRUE(module);
  EXPECT_TRUE(mlir::switchyard::isStraightLine(
      *module->getFunction("_mlir_ciface_line")));
  EXPECT_FALSE(mlir::switchyard::isStraightLine(*module->getFunction("big")));

  std::vector<std::string> parts =
      mlir::switchyard::splitOffLoopNests(*module, 2);
  ASSERT_EQ(parts.size(), 2u);
  ASSERT_FALSE(llvm::verifyModule(*module, &llvm::errs()));

  // The module: the straight line, declarations of the nests, both
  // globals defined; the counter, which a part uses, external; the table,
  // which parts copy, and the straight line's own internal helper keep
  // their linkage.
  EXPECT_FALSE(module->getFunction("_mlir_ciface_line")->isDeclaration());
  for (const char *name : {"big", "middle", "small"}) {
    EXPECT_TRUE(module->getFunction(name)->isDeclaration()) << name;
    EXPECT_TRUE(module->getFunction(name)->hasExternalLinkage()) << name;
  }
  for (const char *name : {"table", "counter"})
    EXPECT_FALSE(module->getGlobalVariable(name, true)->isDeclaration())
        << name;
  EXPECT_TRUE(module->getGlobalVariable("counter", true)->hasExternalLinkage());
  EXPECT_TRUE(module->getGlobalVariable("table", true)->hasInternalLinkage());
  EXPECT_TRUE(module->getFunction("entry")->hasInternalLinkage());

  // Each part on its own: the largest nest alone, the two others together.
  std::set<std::string> defined;
  std::vector<size_t> counts;
  for (const std::string &bitcode : parts) {
    llvm::LLVMContext partContext;
    llvm::Expected<std::unique_ptr<llvm::Module>> part =
        llvm::parseBitcodeFile(llvm::MemoryBufferRef(bitcode, "part"),
                               partContext);
    ASSERT_TRUE(bool(part)) << llvm::toString(part.takeError());
    ASSERT_FALSE(llvm::verifyModule(**part, &llvm::errs()));
    size_t count = 0;
    for (llvm::Function &function : **part) {
      if (function.isDeclaration())
        continue;
      EXPECT_TRUE(defined.insert(function.getName().str()).second)
          << function.getName().str() << " defined twice";
      EXPECT_TRUE(function.hasExternalLinkage());
      ++count;
    }
    counts.push_back(count);
    // The part with @big has its own (internal) table; the counter, which
    // @middle writes, stays the module's.
    llvm::GlobalVariable *table = (*part)->getGlobalVariable(
        "table", /*AllowInternal=*/true);
    ASSERT_TRUE(table);
    bool hasBig = !(*part)->getFunction("big")->isDeclaration();
    EXPECT_EQ(!table->isDeclaration(), hasBig);
    if (hasBig)
      EXPECT_TRUE(table->hasInternalLinkage());
    EXPECT_TRUE(
        (*part)->getGlobalVariable("counter", true)->isDeclaration());
    EXPECT_FALSE((*part)->getFunction("_mlir_ciface_line")->size());
  }
  EXPECT_EQ(defined, (std::set<std::string>{"big", "middle", "small"}));
  std::sort(counts.begin(), counts.end());
  EXPECT_EQ(counts, (std::vector<size_t>{1, 2}));
}

TEST(SplitModuleTest, NoPartsWithoutLoopNests) {
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = parseLLVM(R"ll(
    define void @_mlir_ciface_line() #0 { ret void }
    attributes #0 = { noinline optnone }
  )ll", context);
  ASSERT_TRUE(module);
  EXPECT_TRUE(mlir::switchyard::splitOffLoopNests(*module, 4).empty());
  EXPECT_FALSE(module->getFunction("_mlir_ciface_line")->isDeclaration());
  // More parts than nests: one part per nest.
  std::unique_ptr<llvm::Module> nests = parseLLVM(kModule, context);
  ASSERT_TRUE(nests);
  EXPECT_EQ(mlir::switchyard::splitOffLoopNests(*nests, 8).size(), 3u);
}

} // namespace

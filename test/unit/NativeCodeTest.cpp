//===- NativeCodeTest.cpp - a compiled module's objects, linked and run ---===//
//
// runtime::detail::generateObjects on a module in the LLVM dialect shaped
// like the CPU pipeline's output (a straight-line entry point calling loop
// nests that read a constant table): one object for the straight lines and
// one per part of the loop nests, which LoadedCode links together and whose
// packed entry point computes what the module says, for any thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/Engine/NativeCode.h"
#include "runtime/Engine/ObjectLoader.h"


#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include "gtest/gtest.h"

namespace rt = switchyard::runtime;

namespace {

// step(i) = table[table[i] + 1] * 10 + i, the table being {1, 2, 4, 8}
// (i = 0 or 1).
constexpr const char *kModule = R"mlir(
  llvm.mlir.global internal constant @table(dense<[1, 2, 4, 8]> : tensor<4xi64>) {addr_space = 0 : i32} : !llvm.array<4 x i64>
  llvm.func @lookup(%i: i64) -> i64 attributes {passthrough = ["noinline"]} {
    %t = llvm.mlir.addressof @table : !llvm.ptr
    %p = llvm.getelementptr %t[0, %i] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.array<4 x i64>
    %v = llvm.load %p : !llvm.ptr -> i64
    llvm.return %v : i64
  }
  llvm.func @scale(%v: i64, %i: i64) -> i64 attributes {passthrough = ["noinline"]} {
    %ten = llvm.mlir.constant(10 : i64) : i64
    %m = llvm.mul %v, %ten : i64
    %r = llvm.add %m, %i : i64
    llvm.return %r : i64
  }
  llvm.func @step(%i: i64) -> i64 attributes {passthrough = ["noinline", "optnone"]} {
    %one = llvm.mlir.constant(1 : i64) : i64
    %a = llvm.call @lookup(%i) : (i64) -> i64
    %b = llvm.add %a, %one : i64
    %c = llvm.call @lookup(%b) : (i64) -> i64
    %r = llvm.call @scale(%c, %i) : (i64, i64) -> i64
    llvm.return %r : i64
  }
  llvm.func @_mlir_ciface_step(%i: i64) -> i64 attributes {passthrough = ["noinline", "optnone"]} {
    %r = llvm.call @step(%i) : (i64) -> i64
    llvm.return %r : i64
  }
)mlir";

class NativeCodeTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    mlir::DialectRegistry registry;
    mlir::registerBuiltinDialectTranslation(registry);
    mlir::registerLLVMDialectTranslation(registry);
    context.appendDialectRegistry(registry);
    context.loadDialect<mlir::LLVM::LLVMDialect>();
  }

  /// The objects of kModule, generated with `threads` threads.
  std::vector<std::string> objects(unsigned threads) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
    EXPECT_TRUE(module);
    if (!module)
      return {};
    rt::detail::NativeCodeOptions options;
    options.optLevel = 2;
    options.threads = threads;
    llvm::Expected<std::vector<std::string>> objects =
        rt::detail::generateObjects(*module, options);
    if (!objects) {
      ADD_FAILURE() << llvm::toString(objects.takeError());
      return {};
    }
    return std::move(*objects);
  }

  /// `code` linked, its entry point `step` resolved.
  static llvm::Expected<std::unique_ptr<rt::detail::LoadedCode>>
  link(const std::vector<std::string> &code) {
    rt::FunctionSpec step;
    step.name = "step";
    return rt::detail::LoadedCode::load(
        code, {},
        [](llvm::orc::MangleAndInterner) { return llvm::orc::SymbolMap(); },
        {step});
  }

  mlir::MLIRContext context;
};

TEST_F(NativeCodeTest, PartsLinkAndComputeTheSameForAnyThreadCount) {
  for (unsigned threads : {1u, 2u, 3u}) {
    std::vector<std::string> code = objects(threads);
    // The straight lines, then one part per thread (two loop nests).
    ASSERT_EQ(code.size(), 1 + std::min(threads, 2u)) << threads;
    llvm::Expected<std::unique_ptr<rt::detail::LoadedCode>> loaded =
        link(code);
    ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
    llvm::Expected<rt::detail::PackedFunction> entry =
        (*loaded)->lookupPacked("_mlir_ciface_step");
    ASSERT_TRUE(bool(entry)) << llvm::toString(entry.takeError());
    for (int64_t i = 0; i < 2; ++i) {
      int64_t result = -1;
      void *slots[] = {&i, &result};
      (*entry)(slots);
      int64_t table[] = {1, 2, 4, 8};
      EXPECT_EQ(result, table[table[i] + 1] * 10 + i) << "i = " << i;
    }
  }
}

TEST_F(NativeCodeTest, ObjectsWithoutTheirPartsDoNotLink) {
  std::vector<std::string> code = objects(2);
  ASSERT_EQ(code.size(), 3u);
  code.pop_back();
  llvm::Expected<std::unique_ptr<rt::detail::LoadedCode>> loaded = link(code);
  EXPECT_FALSE(bool(loaded));
  if (!loaded)
    llvm::consumeError(loaded.takeError());
}

} // namespace

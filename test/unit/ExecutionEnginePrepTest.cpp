//===- ExecutionEnginePrepTest.cpp - readying a module for the JIT --------===//
//
// runtime::detail::prepareForExecutionEngine, on a module in the LLVM
// dialect shaped like the CPU pipeline's output: the function behind a C
// interface becomes internal (and, when switchyard-cpu-outline-loops made
// it optnone, always-inline instead); argument and result attributes of
// other dialects go, the llvm dialect's stay; other functions keep their
// linkage.
//
//===----------------------------------------------------------------------===//

#include "runtime/ProgramSupport.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;

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
)mlir";

TEST(ExecutionEnginePrepTest, InternalizesCInterfaceTargetsAndDropsForeignAttributes) {
  MLIRContext context;
  context.loadDialect<LLVM::LLVMDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  ASSERT_TRUE(module);

  ::switchyard::runtime::detail::prepareForExecutionEngine(*module);
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

  // Functions without a C interface keep their linkage.
  EXPECT_EQ(function("helper").getLinkage(), LLVM::Linkage::External);
  EXPECT_EQ(function("external").getLinkage(), LLVM::Linkage::External);
  EXPECT_TRUE(succeeded(mlir::verify(*module)));
}

} // namespace

//===- DialectTest.cpp - C++ API tests of the moe and lm dialects ---------===//
//
// Builds ops through the C++ API (OpTy::create) and checks what the
// verifiers and the parameter-owner interface report, against numbers taken
// from the SwitchHead paper's configuration tables.
//
//===----------------------------------------------------------------------===//

#include "lib/InitSwitchyard.h"
#include "dialect/Lm/IR/LmOps.h"
#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;

namespace {

class DialectTest : public ::testing::Test {
protected:
  DialectTest() {
    DialectRegistry registry;
    switchyard::registerDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    module = ModuleOp::create(UnknownLoc::get(&context));
    builder.setInsertionPointToEnd(module->getBody());
  }

  /// A function whose arguments have the given types, to build ops on.
  Block *makeFunction(ArrayRef<Type> argTypes) {
    auto func = func::FuncOp::create(builder, builder.getUnknownLoc(), "f",
                                     builder.getFunctionType(argTypes, {}));
    Block *body = func.addEntryBlock();
    builder.setInsertionPointToEnd(body);
    return body;
  }

  /// Verifies `op`, returning the first diagnostic, or "" when it verifies.
  std::string verifyMessage(Operation *op) {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (message.empty())
        message = diag.str();
      return success();
    });
    if (succeeded(verify(op)))
      return "";
    return message;
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type element = {}) {
    return RankedTensorType::get(shape, element ? element
                                                : builder.getF32Type());
  }

  MLIRContext context;
  OpBuilder builder{&context};
  OwningOpRef<ModuleOp> module;
};

TEST_F(DialectTest, TopKBuiltWithTooLargeKIsRejected) {
  Block *body = makeFunction({tensor({ShapedType::kDynamic, 2, 5})});
  auto topk = moe::TopKOp::create(
      builder, builder.getUnknownLoc(),
      TypeRange{tensor({ShapedType::kDynamic, 2, 6}),
                tensor({ShapedType::kDynamic, 2, 6}, builder.getI32Type())},
      body->getArgument(0), /*k=*/6, /*mask=*/Value());
  EXPECT_EQ(verifyMessage(topk),
            "'moe.topk' op expected k (the k attribute, 6) to be at most the "
            "number of experts (the last dimension of scores, 5)");
}

TEST_F(DialectTest, ExpertProjBuiltThroughTheApiVerifies) {
  // The 47M SwitchHead value projection: 2 heads × 5 experts, 412 → 76, k 3.
  int64_t n = ShapedType::kDynamic;
  Block *body = makeFunction({tensor({n, 412}), tensor({10, 412, 76}),
                              tensor({n, 2, 3}),
                              tensor({n, 2, 3}, builder.getI64Type())});
  auto proj = moe::ExpertProjOp::create(
      builder, builder.getUnknownLoc(), tensor({n, 2, 76}),
      body->getArgument(0), body->getArgument(1), body->getArgument(2),
      body->getArgument(3));
  EXPECT_EQ(verifyMessage(proj), "");

  // The same projection claiming 4 heads: 10 expert matrices do not split.
  Block *bad = makeFunction({tensor({n, 412}), tensor({10, 412, 76}),
                             tensor({n, 4, 2}),
                             tensor({n, 4, 2}, builder.getI64Type())});
  auto wrong = moe::ExpertProjOp::create(
      builder, builder.getUnknownLoc(), tensor({n, 4, 76}),
      bad->getArgument(0), bad->getArgument(1), bad->getArgument(2),
      bad->getArgument(3));
  EXPECT_EQ(verifyMessage(wrong),
            "'moe.expert_proj' op expected weight dim 0 (10 expert matrices, "
            "heads × experts) to be a multiple of the head count (gates dim 1, "
            "4)");
}

/// Parses a one-layer model and returns the parameters of its first layer.
std::vector<std::pair<std::string, std::vector<int64_t>>>
paramsOfFirstLayer(MLIRContext &context, StringRef source, int64_t depth) {
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(source, &context);
  EXPECT_TRUE(parsed);
  std::vector<std::pair<std::string, std::vector<int64_t>>> result;
  if (!parsed)
    return result;
  parsed->walk([&](lm::ParamOwnerOpInterface layer) {
    if (!result.empty())
      return;
    SmallVector<lm::ParamDecl> params;
    layer.getParams(params, depth);
    for (const lm::ParamDecl &param : params)
      result.push_back(
          {param.name,
           {param.type.getShape().begin(), param.type.getShape().end()}});
  });
  return result;
}

TEST_F(DialectTest, SwitchHeadOwnsThePaperShapes) {
  // 47M C4 SwitchHead (SWITCHHEAD.md): d 412, n_h 2, E 5, d_h 76, XL.
  // W_Q, W_K: d × (n_h·d_h) (stored as Linear weights [n_h·d_h, d]);
  // W_V [n_h·E, d, d_h]; W_O [n_h·E, d_h, d]; W_SV, W_SO [n_h·E, d].
  auto params = paramsOfFirstLayer(context, R"mlir(
    func.func @f(%x: tensor<?x256x412xf32>) {
      %y = lm.switchhead "layers.3.att" %x {heads = 2, experts = 5, k = 3,
                                           head_dim = 76, pos = #lm.pos<xl>}
          : tensor<?x256x412xf32>
      return
    })mlir",
                                   16);
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"layers.3.att.norm.weight", {412}},
      {"layers.3.att.norm.bias", {412}},
      {"layers.3.att.q", {152, 412}},
      {"layers.3.att.k", {152, 412}},
      {"layers.3.att.v", {10, 412, 76}},
      {"layers.3.att.o", {10, 76, 412}},
      {"layers.3.att.sel_v", {10, 412}},
      {"layers.3.att.sel_o", {10, 412}},
      {"layers.3.att.pos", {152, 412}},
  };
  EXPECT_EQ(params, expected);
}

TEST_F(DialectTest, SigmaMoeOwnsThePaperShapes) {
  // sigma-MoE small config: E_f 16, g 128, K 4; W1 [E_f, d, g],
  // W2 [E_f, g, d], W_sel [E_f, d].
  auto params = paramsOfFirstLayer(context, R"mlir(
    func.func @f(%x: tensor<?x256x412xf32>) {
      %y = lm.sigma_moe "layers.0.ffn" %x {experts = 16, k = 4, expert_dim = 128}
          : tensor<?x256x412xf32>
      return
    })mlir",
                                   16);
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"layers.0.ffn.norm.weight", {412}},
      {"layers.0.ffn.norm.bias", {412}},
      {"layers.0.ffn.sel", {16, 412}},
      {"layers.0.ffn.up", {16, 412, 128}},
      {"layers.0.ffn.down", {16, 128, 412}},
  };
  EXPECT_EQ(params, expected);
}

TEST_F(DialectTest, ScaledInitialisersFollowTheDepth) {
  // s = √(2/L); q ~ s/√d, o ~ s/√(n_h·d_h). With L = 8, d = 64, 4×16 heads:
  // s = 0.5, q std 0.0625, o std 0.0625.
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(R"mlir(
    func.func @f(%x: tensor<1x4x64xf32>) {
      %y = lm.mha "att" %x {heads = 4, head_dim = 16} : tensor<1x4x64xf32>
      return
    })mlir",
                                                              &context);
  ASSERT_TRUE(parsed);
  SmallVector<lm::ParamDecl> params;
  parsed->walk([&](lm::MhaOp op) { op.getParams(params, 8); });
  ASSERT_EQ(params.size(), 6u);
  EXPECT_EQ(params[2].name, "att.q");
  EXPECT_DOUBLE_EQ(params[2].init.getStd().convertToDouble(), 0.0625);
  EXPECT_EQ(params[5].name, "att.o");
  EXPECT_DOUBLE_EQ(params[5].init.getStd().convertToDouble(), 0.0625);
  EXPECT_EQ(params[0].init.getKind(), lm::InitKind::ones);
  EXPECT_EQ(params[1].init.getKind(), lm::InitKind::zeros);
}

TEST_F(DialectTest, ModelCountsAttentionBlocksAsLayers) {
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(R"mlir(
    lm.model @m(%t: tensor<1x4xi32>) -> tensor<1x4x8xf32> {
      %x = lm.embed "embed" %t {vocab = 8} : tensor<1x4xi32> -> tensor<1x4x8xf32>
      %a = lm.mha "l0" %x {heads = 2, head_dim = 4} : tensor<1x4x8xf32>
      %f = lm.ffn "f0" %a {d_ff = 8} : tensor<1x4x8xf32>
      %b = lm.switchhead "l1" %f {heads = 2, experts = 2, k = 1, head_dim = 4} : tensor<1x4x8xf32>
      %l = lm.output "out" %b {vocab = 8} : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
      lm.return %l : tensor<1x4x8xf32>
    })mlir",
                                                              &context);
  ASSERT_TRUE(parsed);
  auto model = *parsed->getOps<lm::ModelOp>().begin();
  EXPECT_EQ(model.getNumLayers(), 2);
}

} // namespace

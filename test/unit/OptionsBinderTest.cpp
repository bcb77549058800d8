//===- OptionsBinderTest.cpp - option structs as pass options and flags ---===//
//
// lib/Pipelines/OptionsBinder.h: the options a struct declares become pass
// pipeline options and command-line flags with the struct's names and
// defaults, and read back into the struct; lib/Pipelines/TargetOptions.h's
// checks name the option as its reader spells it.
//
//===----------------------------------------------------------------------===//

#include "lib/Pipelines/OptionsBinder.h"
#include "lib/Pipelines/Pipelines.h"
#include "lib/Pipelines/TargetOptions.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

namespace sy = mlir::switchyard;

namespace {

TEST(OptionsBinderTest, PipelineOptionsReadBackIntoTheStruct) {
  // Defaults: the struct's.
  auto defaults = sy::GpuPipelineOptions::createFromString("");
  ASSERT_TRUE(defaults);
  sy::GpuTargetOptions expected;
  sy::GpuTargetOptions value = defaults->target.value();
  EXPECT_EQ(value.chip, expected.chip);
  EXPECT_EQ(value.format, expected.format);
  EXPECT_EQ(value.optLevel, expected.optLevel);
  EXPECT_EQ(value.blockSize, expected.blockSize);
  EXPECT_EQ(value.ptxasOptions, expected.ptxasOptions);
  EXPECT_FALSE(value.wgmma);

  // Parsed: every kind of field, and the model options beside them.
  auto parsed = sy::GpuPipelineOptions::createFromString(
      "chip=sm_90a element-type=bf16 wgmma=1 block-size=128 opt-level=2 "
      "format=isa train-step=1");
  ASSERT_TRUE(parsed);
  value = parsed->target.value();
  EXPECT_EQ(value.chip, "sm_90a");
  EXPECT_EQ(value.elementType, "bf16");
  EXPECT_TRUE(value.wgmma);
  EXPECT_EQ(value.blockSize, 128);
  EXPECT_EQ(value.optLevel, 2u);
  EXPECT_EQ(value.format, "isa");
  EXPECT_TRUE(parsed->trainStep);
  EXPECT_TRUE(value.usesWgmma());

  // The options print as they parse (a pipeline's textual form).
  std::string text;
  llvm::raw_string_ostream os(text);
  parsed->print(os);
  EXPECT_NE(text.find("chip=sm_90a"), std::string::npos) << text;
  EXPECT_NE(text.find("block-size=128"), std::string::npos) << text;

  auto emulation = sy::GpuEmulationPipelineOptions::createFromString(
      "tensor-cores=0 check-bounds=1 element-type=f16");
  ASSERT_TRUE(emulation);
  sy::GpuEmulationOptions emulated = emulation->emulation.value();
  EXPECT_FALSE(emulated.tensorCores);
  EXPECT_TRUE(emulated.checkBounds);
  EXPECT_EQ(emulated.elementType, "f16");
  EXPECT_FALSE(emulated.usesTensorCores());

  // An option the struct does not declare is refused.
  EXPECT_FALSE(sy::GpuPipelineOptions::createFromString("tensor-cores=0"));
}

TEST(OptionsBinderTest, CommandLineFlagsWriteTheStruct) {
  // Flags and categories stay registered for the process: statics.
  static llvm::cl::OptionCategory category("binder test");
  static sy::CommandLineBinding<sy::GpuTargetOptions> flags("test-gpu-",
                                                            category);
  EXPECT_TRUE(flags.given().empty());
  const char *argv[] = {"test", "--test-gpu-chip=sm_75", "--test-gpu-wgmma",
                        "--test-gpu-block-size=64"};
  ASSERT_TRUE(llvm::cl::ParseCommandLineOptions(4, argv, "", &llvm::errs()));
  EXPECT_EQ(flags.value().chip, "sm_75");
  EXPECT_TRUE(flags.value().wgmma);
  EXPECT_EQ(flags.value().blockSize, 64);
  EXPECT_EQ(flags.value().format, "bin");
  EXPECT_EQ(flags.given(),
            (llvm::SmallVector<std::string>{"--test-gpu-chip",
                                            "--test-gpu-block-size",
                                            "--test-gpu-wgmma"}));
  // sm_75: the emulation of these kernels takes the SIMT route.
  EXPECT_FALSE(flags.value().emulation().tensorCores);
  EXPECT_EQ(flags.value().emulation().blockSize, 64);
}

TEST(OptionsBinderTest, ChecksNameTheOption) {
  sy::GpuTargetOptions options;
  options.chip = "sm_61";
  llvm::Error error = options.verify("--gpu-");
  ASSERT_TRUE(static_cast<bool>(error));
  EXPECT_EQ(llvm::toString(std::move(error)).rfind("--gpu-chip: expected", 0),
            0u);
  options.chip = "";
  options.blockSize = 2048;
  error = options.verify("pipeline option ");
  ASSERT_TRUE(static_cast<bool>(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "pipeline option block-size: expected 1 to 1024, found 2048");
  sy::GpuEmulationOptions emulation;
  emulation.elementType = "f8";
  error = emulation.verify("");
  ASSERT_TRUE(static_cast<bool>(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "element-type: expected f32, bf16 or f16, found 'f8'");
  // An empty chip is sm_80 where no device says otherwise.
  EXPECT_EQ(sy::GpuTargetOptions().chipOrDefault(), "sm_80");
}

} // namespace

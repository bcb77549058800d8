//===- TrainingTest.cpp - training loop, checkpoints and exact resume -----===//
//
// Trains a small model for a few steps on a generated text and checks that
// a run interrupted after a checkpoint and resumed repeats the
// uninterrupted run exactly (same losses, same final parameters and
// optimizer state), that the schedule is the documented one, and that
// truncated or foreign checkpoints are refused with a clear message.
//
//===----------------------------------------------------------------------===//

#include "runtime/CpuProgram.h"
#include "runtime/Training.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <cmath>
#include <fstream>
#include <numbers>

using namespace switchyard::runtime;

namespace {

const char *kModel = R"mlir(
  lm.model @small(%t: tensor<?x8xi32>) -> tensor<?x8x256xf32> {
    %x0 = lm.embed "embed" %t {vocab = 256} : tensor<?x8xi32> -> tensor<?x8x8xf32>
    %a0 = lm.switchhead "att" %x0 {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<rope>} : tensor<?x8x8xf32>
    %x1 = lm.sigma_moe "ffn" %a0 {experts = 3, k = 1, expert_dim = 4} : tensor<?x8x8xf32>
    %h = lm.layer_norm "norm" %x1 : tensor<?x8x8xf32>
    %l = lm.output "out" %h {vocab = 256} : tensor<?x8x8xf32> -> tensor<?x8x256xf32>
    lm.return %l : tensor<?x8x256xf32>
  })mlir";

class TrainingTest : public ::testing::Test {
protected:
  void SetUp() override {
    CompileOptions options;
    options.trainStep = true;
    llvm::Expected<std::unique_ptr<CpuProgram>> compiled =
        CpuProgram::compile(kModel, "small.mlir", options);
    ASSERT_TRUE(static_cast<bool>(compiled))
        << llvm::toString(compiled.takeError());
    program = std::move(*compiled);
    std::string text;
    for (int i = 0; i < 100; ++i)
      text += "the cat sat on the mat; the dog sat on the log. ";
    bytes.train.assign(text.begin(), text.end() - 600);
    bytes.valid.assign(text.end() - 600, text.end());
    bytes.source = "test";
    corpus = TokenCorpus::fromBytes(bytes);
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("train-test", dir));
    directory = std::string(dir);
  }
  void TearDown() override { llvm::sys::fs::remove_directories(directory); }

  std::string file(const char *name) { return directory + "/" + name; }

  llvm::Expected<TrainSummary> run(const TrainConfig &config) {
    return train(*program, corpus, config, [](const StepRecord &) {},
                 [](const EvalRecord &) {});
  }

  static TrainConfig config() {
    TrainConfig c;
    c.steps = 8;
    c.batch = 3;
    c.warmup = 2;
    c.lr = 1e-2;
    c.evalEvery = 0;
    c.evalBatches = 1;
    c.seed = 4;
    return c;
  }

  static std::vector<uint8_t> fileBytes(const std::string &path) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer)
      return {};
    llvm::StringRef content = (*buffer)->getBuffer();
    return {content.begin(), content.end()};
  }

  std::unique_ptr<CpuProgram> program;
  ByteCorpus bytes;
  TokenCorpus corpus;
  std::string directory;
};

TEST_F(TrainingTest, ResumeRepeatsTheUninterruptedRun) {
  TrainConfig straight = config();
  straight.checkpoint = file("straight.safetensors");
  llvm::Expected<TrainSummary> full = run(straight);
  ASSERT_TRUE(static_cast<bool>(full)) << llvm::toString(full.takeError());
  ASSERT_EQ(full->steps.size(), 8u);
  EXPECT_LT(full->steps.back().loss, full->steps.front().loss);

  // Interrupted after step 5, with its checkpoint.
  TrainConfig interrupted = config();
  interrupted.checkpoint = file("interrupted.safetensors");
  interrupted.stopAfter = 5;
  llvm::Expected<TrainSummary> part = run(interrupted);
  ASSERT_TRUE(static_cast<bool>(part)) << llvm::toString(part.takeError());
  ASSERT_EQ(part->steps.size(), 5u);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(part->steps[i].loss, full->steps[i].loss) << "step " << i + 1;

  // Resumed to the end: the same losses, bit for bit, and the same final
  // parameters and optimizer state.
  TrainConfig resumed = config();
  resumed.resume = file("interrupted.safetensors");
  resumed.checkpoint = file("resumed.safetensors");
  llvm::Expected<TrainSummary> rest = run(resumed);
  ASSERT_TRUE(static_cast<bool>(rest)) << llvm::toString(rest.takeError());
  ASSERT_EQ(rest->steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rest->steps[i].step, int64_t(6 + i));
    EXPECT_EQ(rest->steps[i].loss, full->steps[5 + i].loss)
        << "step " << 6 + i;
  }
  EXPECT_EQ(rest->evals.back().loss, full->evals.back().loss);
  EXPECT_EQ(fileBytes(file("resumed.safetensors")),
            fileBytes(file("straight.safetensors")));
}

TEST_F(TrainingTest, ResumeNeedsTheSameSettings) {
  TrainConfig first = config();
  first.checkpoint = file("seeded.safetensors");
  first.stopAfter = 2;
  ASSERT_TRUE(static_cast<bool>(run(first)));
  // Another seed would draw other batches: refused, naming the setting.
  TrainConfig other = config();
  other.seed = first.seed + 1;
  other.resume = file("seeded.safetensors");
  llvm::Expected<TrainSummary> refused = run(other);
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_NE(llvm::toString(refused.takeError())
                .find("the checkpoint was written with seed = '4', this run "
                      "has '5'"),
            std::string::npos);
  // Evaluation needs at least one window.
  llvm::Expected<EvalRecord> none = evaluate(*program, corpus, {}, 0, 3);
  ASSERT_FALSE(static_cast<bool>(none));
  EXPECT_NE(llvm::toString(none.takeError()).find("at least one window"),
            std::string::npos);
}

TEST_F(TrainingTest, ScheduleWarmsUpThenDecaysToZero) {
  TrainConfig c = config();
  c.steps = 100;
  c.warmup = 10;
  c.lr = 1.0;
  EXPECT_DOUBLE_EQ(scheduledLr(c, 5), 0.5 * 0.5 * (1 + std::cos(0.05 * std::numbers::pi)));
  EXPECT_DOUBLE_EQ(scheduledLr(c, 10), 0.5 * (1 + std::cos(0.1 * std::numbers::pi)));
  EXPECT_DOUBLE_EQ(scheduledLr(c, 50), 0.5);
  EXPECT_NEAR(scheduledLr(c, 100), 0.0, 1e-15);
}

TEST_F(TrainingTest, BadCheckpointsAreRefused) {
  TrainConfig first = config();
  first.steps = 2;
  first.checkpoint = file("good.safetensors");
  ASSERT_TRUE(static_cast<bool>(run(first)));

  auto resumeFrom = [&](const std::string &path) {
    TrainConfig c = config();
    c.resume = path;
    llvm::Expected<TrainSummary> s = run(c);
    return s ? std::string() : llvm::toString(s.takeError());
  };
  // Truncated.
  std::vector<uint8_t> good = fileBytes(file("good.safetensors"));
  ASSERT_GT(good.size(), 2000u);
  std::ofstream(file("truncated.safetensors"), std::ios::binary)
      .write(reinterpret_cast<const char *>(good.data()), 1500);
  EXPECT_NE(resumeFrom(file("truncated.safetensors")).find("truncated.safetensors"),
            std::string::npos);
  // Foreign: a safetensors file that is not a training checkpoint.
  HostTensor w = HostTensor::fromValues<float>("embed.weight",
                                               ElementType::f32, {2},
                                               std::vector<float>{1, 2});
  ASSERT_FALSE(static_cast<bool>(
      writeSafetensors(file("foreign.safetensors"), {w})));
  EXPECT_NE(resumeFrom(file("foreign.safetensors"))
                .find("not a Switchyard training checkpoint"),
            std::string::npos);
  // Another model's checkpoint.
  ASSERT_FALSE(static_cast<bool>(writeSafetensors(
      file("other.safetensors"), {w},
      {{"format", "switchyard-checkpoint-1"}, {"model", "other"}})));
  EXPECT_NE(resumeFrom(file("other.safetensors"))
                .find("a checkpoint of model @other, not of @small"),
            std::string::npos);
}

TEST_F(TrainingTest, SentencePieceSubwords) {
  // A subword vocabulary trained on the training text: fewer tokens than
  // bytes, ids within the vocabulary, the same encoding after save + load.
  llvm::Expected<std::unique_ptr<SentencePieceTokenizer>> sp =
      SentencePieceTokenizer::train(bytes, 320);
  ASSERT_TRUE(static_cast<bool>(sp)) << llvm::toString(sp.takeError());
  llvm::Expected<TokenCorpus> tokens = (*sp)->encode(bytes);
  ASSERT_TRUE(static_cast<bool>(tokens)) << llvm::toString(tokens.takeError());
  // 320 pieces leave few merges beyond the 256 bytes and the characters.
  EXPECT_GT(tokens->trainBytesPerToken, 1.2);
  EXPECT_LT(tokens->train.size(), bytes.train.size());
  for (int32_t id : tokens->train)
    ASSERT_TRUE(id >= 0 && id < tokens->vocab);
  ASSERT_FALSE(static_cast<bool>((*sp)->save(file("sp.model"))));
  llvm::Expected<std::unique_ptr<SentencePieceTokenizer>> loaded =
      SentencePieceTokenizer::load(file("sp.model"));
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  llvm::Expected<TokenCorpus> again = (*loaded)->encode(bytes);
  ASSERT_TRUE(static_cast<bool>(again));
  EXPECT_EQ(again->train, tokens->train);

  // A model with room for the pieces trains on these ids, and validation
  // converts nats per token into bits per byte. (The 256-byte model is
  // refused: its vocabulary is too small.)
  TrainConfig c = config();
  c.steps = 3;
  llvm::Expected<TrainSummary> refused =
      train(*program, *tokens, c, [](const StepRecord &) {},
            [](const EvalRecord &) {});
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("token ids, but the "
                                                     "model's vocabulary is 256"),
            std::string::npos);
  std::string wide = kModel;
  for (size_t at; (at = wide.find("256")) != std::string::npos;)
    wide.replace(at, 3, "320");
  CompileOptions options;
  options.trainStep = true;
  llvm::Expected<std::unique_ptr<CpuProgram>> subword =
      CpuProgram::compile(wide, "small320.mlir", options);
  ASSERT_TRUE(static_cast<bool>(subword))
      << llvm::toString(subword.takeError());
  llvm::Expected<TrainSummary> run =
      train(**subword, *tokens, c, [](const StepRecord &) {},
            [](const EvalRecord &) {});
  ASSERT_TRUE(static_cast<bool>(run)) << llvm::toString(run.takeError());
  const EvalRecord &last = run->evals.back();
  EXPECT_NEAR(last.bitsPerByte,
              last.loss / std::numbers::ln2 / tokens->validBytesPerToken,
              1e-12);

  // A model file that is not one is refused.
  std::ofstream(file("bad.model")) << "not a model";
  llvm::Expected<std::unique_ptr<SentencePieceTokenizer>> bad =
      SentencePieceTokenizer::load(file("bad.model"));
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("not a SentencePiece model"),
            std::string::npos);
}

} // namespace

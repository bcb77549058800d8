//===- TrainingTest.cpp - training loop, checkpoints and exact resume -----===//
//
// Trains a small model for a few steps on a generated text and checks that
// a run interrupted after a checkpoint and resumed repeats the
// uninterrupted run exactly (same losses, same final parameters and
// optimizer state), that the schedule is the documented one, and that
// truncated or foreign checkpoints are refused with a clear message. A
// counting backend double checks that the training state stays resident
// (Program::upload / callResident): uploaded once, replaced by each step's
// results, downloaded only for checkpoints, every handle released.
//
//===----------------------------------------------------------------------===//

#include "runtime/ComputeThreads.h"
#include "runtime/Engine/CpuProgram.h"
#include "runtime/Training.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
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

  /// `model` compiled with its training step; null, and a test failure,
  /// where it does not compile.
  static std::unique_ptr<CpuProgram> compileTrainStep(const char *model,
                                                      const char *name) {
    CompileOptions options;
    options.trainStep = true;
    llvm::Expected<std::unique_ptr<CpuProgram>> compiled =
        CpuProgram::compile(model, name, options);
    if (!compiled) {
      ADD_FAILURE() << llvm::toString(compiled.takeError());
      return nullptr;
    }
    return std::move(*compiled);
  }

  /// The losses of `steps` training steps of `program` from its seed, the
  /// final checkpoint written to `checkpoint`; none, and a test failure,
  /// where training fails.
  std::vector<double> trainLosses(CpuProgram &program, int64_t steps,
                                  const std::string &checkpoint) {
    TrainConfig c = config();
    c.steps = steps;
    c.checkpoint = checkpoint;
    llvm::Expected<TrainSummary> summary =
        train(program, corpus, c, [](const StepRecord &) {},
              [](const EvalRecord &) {});
    if (!summary) {
      ADD_FAILURE() << llvm::toString(summary.takeError());
      return {};
    }
    std::vector<double> losses;
    for (const StepRecord &step : summary->steps)
      losses.push_back(step.loss);
    return losses;
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

  /// The setting `key` a checkpoint was written with.
  static std::string stateSetting(const std::string &path,
                                  const std::string &key) {
    TensorMetadata metadata;
    llvm::Expected<std::vector<HostTensor>> read =
        readSafetensors(path, &metadata);
    if (!read) {
      llvm::consumeError(read.takeError());
      return {};
    }
    return metadata[key];
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

/// A backend double for the resident-tensor interface: forwards to a real
/// program, keeps its own handles (host copies, under another backend name)
/// and records what crosses between host and "device".
class CountingProgram final : public Program {
public:
  explicit CountingProgram(Program &inner) : inner(inner) {}

  const std::vector<FunctionSpec> &functions() const override {
    return inner.functions();
  }
  const ParamTable &params() const override { return inner.params(); }
  llvm::Expected<std::vector<HostTensor>>
  call(llvm::StringRef name,
       llvm::ArrayRef<const HostTensor *> arguments) override {
    ++hostOnlyCalls;
    return inner.call(name, arguments);
  }
  llvm::StringRef backend() const override { return "counting"; }

  struct Handle final : DeviceTensor {
    Handle(HostTensor tensor, CountingProgram &owner)
        : DeviceTensor(tensor.type, tensor.shape, tensor.name),
          tensor(std::move(tensor)), owner(owner) {
      owner.peak = std::max(owner.peak, ++owner.live);
    }
    ~Handle() override { --owner.live; }
    llvm::StringRef backend() const override { return "counting"; }
    HostTensor tensor;
    CountingProgram &owner;
  };

  llvm::Expected<std::unique_ptr<DeviceTensor>>
  upload(const HostTensor &tensor) override {
    ++uploads;
    return std::make_unique<Handle>(tensor, *this);
  }
  llvm::Expected<HostTensor> download(const DeviceTensor &tensor) override {
    ++downloads;
    EXPECT_EQ(tensor.backend(), "counting");
    return static_cast<const Handle &>(tensor).tensor;
  }

  struct CallRecord {
    std::string name;
    size_t hostArguments = 0, handleArguments = 0;
    std::vector<bool> keep;
  };
  llvm::Expected<std::vector<CallResult>>
  callResident(llvm::StringRef name, llvm::ArrayRef<CallArgument> arguments,
               llvm::ArrayRef<bool> keep) override {
    CallRecord record{name.str(), 0, 0,
                      std::vector<bool>(keep.begin(), keep.end())};
    std::vector<const HostTensor *> hosts;
    for (const CallArgument &argument : arguments) {
      EXPECT_TRUE((argument.host == nullptr) != (argument.device == nullptr));
      if (argument.host) {
        ++record.hostArguments;
        hosts.push_back(argument.host);
      } else {
        ++record.handleArguments;
        EXPECT_EQ(argument.device->backend(), "counting");
        hosts.push_back(&static_cast<const Handle *>(argument.device)->tensor);
      }
    }
    calls.push_back(record);
    llvm::Expected<std::vector<HostTensor>> results = inner.call(name, hosts);
    if (!results)
      return results.takeError();
    std::vector<CallResult> out(results->size());
    for (size_t i = 0; i < results->size(); ++i) {
      if (i < keep.size() && keep[i])
        out[i].device = std::make_unique<Handle>((*results)[i], *this);
      else
        out[i].host = std::move((*results)[i]);
    }
    return out;
  }

  Program &inner;
  int uploads = 0, downloads = 0, hostOnlyCalls = 0, live = 0, peak = 0;
  std::vector<CallRecord> calls;
};

TEST_F(TrainingTest, StateStaysResidentBetweenSteps) {
  size_t count = program->params().params.size();
  TrainConfig c = config();
  c.checkpoint = file("plain.safetensors");
  llvm::Expected<TrainSummary> plain = run(c);
  ASSERT_TRUE(static_cast<bool>(plain)) << llvm::toString(plain.takeError());

  CountingProgram counting(*program);
  c.checkpoint = file("counted.safetensors");
  llvm::Expected<TrainSummary> counted =
      train(counting, corpus, c, [](const StepRecord &) {},
            [](const EvalRecord &) {});
  ASSERT_TRUE(static_cast<bool>(counted))
      << llvm::toString(counted.takeError());

  // Parameters and both moments: uploaded once, downloaded once (the final
  // checkpoint), never passed as host tensors.
  EXPECT_EQ(counting.uploads, int(3 * count));
  EXPECT_EQ(counting.downloads, int(3 * count));
  EXPECT_EQ(counting.hostOnlyCalls, 0);
  size_t steps = 0, evals = 0;
  for (const CountingProgram::CallRecord &call : counting.calls) {
    if (call.name == "small_train_step") {
      ++steps;
      // Tokens, targets and hyperparameters (this model has no dropout
      // seed) from the host; the state resident.
      EXPECT_EQ(call.hostArguments, 3u);
      EXPECT_EQ(call.handleArguments, 3 * count);
      ASSERT_EQ(call.keep.size(), 2 + 3 * count);
      EXPECT_FALSE(call.keep[0]); // loss
      EXPECT_FALSE(call.keep[1]); // gradient norm
      for (size_t i = 2; i < call.keep.size(); ++i)
        EXPECT_TRUE(call.keep[i]) << "result #" << i;
    } else {
      ++evals;
      EXPECT_EQ(call.name, "small");
      EXPECT_EQ(call.hostArguments, 1u);
      EXPECT_EQ(call.handleArguments, count);
      EXPECT_FALSE(llvm::is_contained(call.keep, true));
    }
  }
  EXPECT_EQ(steps, 8u);
  EXPECT_EQ(evals, 1u);
  // Each step's results replace the state: at most the old and the new
  // state at once, nothing left when the run ends.
  EXPECT_LE(counting.peak, int(6 * count));
  EXPECT_EQ(counting.live, 0);

  // The same run as with host tensors, bit for bit.
  ASSERT_EQ(counted->steps.size(), plain->steps.size());
  for (size_t i = 0; i < plain->steps.size(); ++i)
    EXPECT_EQ(counted->steps[i].loss, plain->steps[i].loss);
  EXPECT_EQ(counted->evals.back().loss, plain->evals.back().loss);
  EXPECT_EQ(fileBytes(file("counted.safetensors")),
            fileBytes(file("plain.safetensors")));
}

TEST_F(TrainingTest, HostBackendHandlesHoldTheirTensors) {
  // The CPU backend's handles are its host tensors: upload, call with a
  // mix of handles and host tensors, keep some results, download.
  std::vector<HostTensor> values;
  const ParamTable &table = program->params();
  for (const ParamSpec &spec : table.params) {
    std::vector<float> v(size_t(spec.numElements()));
    initialize(spec, 1, v);
    values.push_back(HostTensor::fromValues<float>(spec.name, ElementType::f32,
                                                   spec.shape, v));
  }
  std::vector<std::unique_ptr<DeviceTensor>> handles;
  for (const HostTensor &tensor : values) {
    llvm::Expected<std::unique_ptr<DeviceTensor>> handle =
        program->upload(tensor);
    ASSERT_TRUE(static_cast<bool>(handle));
    EXPECT_EQ((*handle)->backend(), "cpu");
    EXPECT_EQ((*handle)->shape(), llvm::ArrayRef<int64_t>(tensor.shape));
    handles.push_back(std::move(*handle));
  }
  llvm::Expected<HostTensor> back = program->download(*handles.front());
  ASSERT_TRUE(static_cast<bool>(back));
  EXPECT_EQ(back->bytes, values.front().bytes);

  HostTensor tokens = HostTensor::fromValues<int32_t>(
      "tokens", ElementType::i32, {2, 8}, std::vector<int32_t>(16, 7));
  std::vector<const HostTensor *> hostArgs = {&tokens};
  std::vector<CallArgument> mixed = {&tokens};
  for (size_t p = 0; p < values.size(); ++p) {
    hostArgs.push_back(&values[p]);
    mixed.push_back(handles[p].get());
  }
  llvm::Expected<std::vector<HostTensor>> expected =
      program->call("small", hostArgs);
  ASSERT_TRUE(static_cast<bool>(expected));
  llvm::Expected<std::vector<CallResult>> kept =
      program->callResident("small", mixed, {true});
  ASSERT_TRUE(static_cast<bool>(kept)) << llvm::toString(kept.takeError());
  ASSERT_TRUE((*kept)[0].device);
  EXPECT_TRUE((*kept)[0].host.bytes.empty());
  llvm::Expected<HostTensor> logits = program->download(*(*kept)[0].device);
  ASSERT_TRUE(static_cast<bool>(logits));
  EXPECT_EQ(logits->bytes, (*expected)[0].bytes);
  llvm::Expected<std::vector<CallResult>> host =
      program->callResident("small", mixed, {});
  ASSERT_TRUE(static_cast<bool>(host));
  EXPECT_FALSE((*host)[0].device);
  EXPECT_EQ((*host)[0].host.bytes, (*expected)[0].bytes);

  // A handle of another backend, or of the wrong shape, is refused by name.
  CountingProgram other(*program);
  llvm::Expected<std::unique_ptr<DeviceTensor>> foreign =
      other.upload(values.front());
  ASSERT_TRUE(static_cast<bool>(foreign));
  mixed[1] = foreign->get();
  llvm::Expected<std::vector<CallResult>> refused =
      program->callResident("small", mixed, {});
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("counting backend"),
            std::string::npos);
  size_t differing = 1;
  while (differing < values.size() && values[differing].shape == values[0].shape)
    ++differing;
  ASSERT_LT(differing, values.size());
  mixed[1] = handles[differing].get();
  llvm::Expected<std::vector<CallResult>> misshapen =
      program->callResident("small", mixed, {});
  ASSERT_FALSE(static_cast<bool>(misshapen));
  EXPECT_NE(llvm::toString(misshapen.takeError()).find("expected shape"),
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
      {{"format", kCheckpointFormat}, {"model", "other"}})));
  EXPECT_NE(resumeFrom(file("other.safetensors"))
                .find("a checkpoint of model @other, not of @small"),
            std::string::npos);
}

TEST_F(TrainingTest, LegacyXlCheckpointsResumeExactly) {
  // A checkpoint written before the XL encoding followed the official one
  // (format switchyard-checkpoint-1) holds the positional weight and its
  // moments for the legacy table. Made here from a current checkpoint by
  // the inverse of the conversion (legacy column i = −column 2i, column
  // D/2 + i = column 2i+1; the second moment without the sign), it
  // resumes to the same final checkpoint, byte for byte.
  const char *xl = R"mlir(
    lm.model @small_xl(%t: tensor<?x8xi32>, %m: tensor<?x8x8xf32>) -> (tensor<?x8x256xf32>, tensor<?x8x8xf32>) {
      %x0 = lm.embed "embed" %t {vocab = 256} : tensor<?x8xi32> -> tensor<?x8x8xf32>
      %a0 = lm.switchhead "att" %x0 memory(%m : tensor<?x8x8xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>} : tensor<?x8x8xf32>
      %h = lm.layer_norm "norm" %a0 : tensor<?x8x8xf32>
      %l = lm.output "out" %h {vocab = 256} : tensor<?x8x8xf32> -> tensor<?x8x256xf32>
      lm.return %l, %x0 : tensor<?x8x256xf32>, tensor<?x8x8xf32>
    })mlir";
  std::unique_ptr<CpuProgram> compiled = compileTrainStep(xl, "small-xl.mlir");
  ASSERT_TRUE(compiled);
  auto runXl = [&](const TrainConfig &c) {
    return train(*compiled, corpus, c, [](const StepRecord &) {},
                 [](const EvalRecord &) {});
  };
  TrainConfig straight = config();
  straight.steps = 5;
  // A rate that format 1 stored rounded ("0.00").
  straight.lr = 2e-3;
  straight.checkpoint = file("xl-straight.safetensors");
  ASSERT_TRUE(static_cast<bool>(runXl(straight)));
  TrainConfig interrupted = straight;
  interrupted.checkpoint = file("xl-current.safetensors");
  interrupted.stopAfter = 3;
  ASSERT_TRUE(static_cast<bool>(runXl(interrupted)));

  TensorMetadata metadata;
  llvm::Expected<std::vector<HostTensor>> tensors =
      readSafetensors(file("xl-current.safetensors"), &metadata);
  ASSERT_TRUE(static_cast<bool>(tensors));
  int converted = 0;
  for (HostTensor &tensor : *tensors) {
    llvm::StringRef name = tensor.name;
    if (!name.ends_with("att.pos"))
      continue;
    bool second = name.starts_with("optimizer.v.");
    std::span<float> w = tensor.values<float>();
    int64_t rows = tensor.shape[0], width = tensor.shape[1];
    std::vector<float> legacy(w.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < width / 2; ++i) {
        float sinPart = w[size_t(r * width + 2 * i)];
        legacy[size_t(r * width + i)] = second ? sinPart : -sinPart;
        legacy[size_t(r * width + width / 2 + i)] =
            w[size_t(r * width + 2 * i + 1)];
      }
    std::copy(legacy.begin(), legacy.end(), w.begin());
    ++converted;
  }
  ASSERT_EQ(converted, 3) << "the weight and its two moments";
  // Format 1's metadata: fewer settings, the learning rate rounded to two
  // decimals as formatv printed it.
  std::string exactLr = metadata["lr"];
  metadata["format"] = "switchyard-checkpoint-1";
  for (const char *key : {"clip", "weight_decay", "beta1", "beta2", "eps"})
    ASSERT_EQ(metadata.erase(key), 1u) << key;
  metadata["lr"] = llvm::formatv("{0}", straight.lr).str();
  ASSERT_NE(metadata["lr"], exactLr);
  ASSERT_FALSE(static_cast<bool>(
      writeSafetensors(file("xl-legacy.safetensors"), *tensors, metadata)));

  TrainConfig resumed = straight;
  resumed.resume = file("xl-legacy.safetensors");
  resumed.checkpoint = file("xl-resumed.safetensors");
  llvm::Expected<TrainSummary> rest = runXl(resumed);
  ASSERT_TRUE(static_cast<bool>(rest)) << llvm::toString(rest.takeError());
  EXPECT_EQ(fileBytes(file("xl-resumed.safetensors")),
            fileBytes(file("xl-straight.safetensors")));
  // Read as it is, the legacy checkpoint would be another model.
  metadata["format"] = kCheckpointFormat;
  metadata["lr"] = exactLr;
  for (const char *key : {"clip", "weight_decay", "beta1", "beta2", "eps"})
    metadata[key] = stateSetting(file("xl-current.safetensors"), key);
  ASSERT_FALSE(static_cast<bool>(
      writeSafetensors(file("xl-unconverted.safetensors"), *tensors,
                       metadata)));
  resumed.resume = file("xl-unconverted.safetensors");
  resumed.checkpoint = file("xl-wrong.safetensors");
  ASSERT_TRUE(static_cast<bool>(runXl(resumed)));
  EXPECT_NE(fileBytes(file("xl-wrong.safetensors")),
            fileBytes(file("xl-straight.safetensors")));
}

TEST_F(TrainingTest, InitFromStartsWithFreshOptimizerState) {
  // Parameters from a file (here a checkpoint's, by Switchyard's names),
  // Adam's moments from zero, the step count from 1: the same run as
  // starting from the checkpoint's parameters with fresh state.
  TrainConfig first = config();
  first.steps = 2;
  first.checkpoint = file("first.safetensors");
  llvm::Expected<TrainSummary> fresh = run(first);
  ASSERT_TRUE(static_cast<bool>(fresh));
  TrainConfig fine = config();
  fine.steps = 3;
  fine.initFrom = {file("first.safetensors")};
  fine.checkpoint = file("fine.safetensors");
  llvm::Expected<TrainSummary> tuned = run(fine);
  ASSERT_TRUE(static_cast<bool>(tuned)) << llvm::toString(tuned.takeError());
  ASSERT_EQ(tuned->steps.size(), 3u);
  EXPECT_EQ(tuned->steps.front().step, 1);
  TensorMetadata metadata;
  llvm::Expected<std::vector<HostTensor>> state =
      readSafetensors(file("fine.safetensors"), &metadata);
  ASSERT_TRUE(static_cast<bool>(state));
  EXPECT_EQ(metadata["step"], "3");
  // Trained parameters score the first batch better than the initial ones.
  EXPECT_LT(tuned->steps.front().loss, fresh->steps.front().loss);
  // The checkpoint's optimizer state played no part: the parameters alone,
  // in a plain file, give the same run.
  llvm::Expected<std::vector<HostTensor>> checkpoint =
      readSafetensors(file("first.safetensors"));
  ASSERT_TRUE(static_cast<bool>(checkpoint));
  std::vector<HostTensor> params;
  for (HostTensor &tensor : *checkpoint) {
    llvm::StringRef name = tensor.name;
    if (!name.starts_with("optimizer.") && !name.starts_with("state."))
      params.push_back(std::move(tensor));
  }
  ASSERT_FALSE(static_cast<bool>(writeSafetensors(
      file("params.safetensors"), params, {{"format", kParamsFormat}})));
  TrainConfig plain = fine;
  plain.initFrom = {file("params.safetensors")};
  plain.checkpoint = file("plain.safetensors");
  ASSERT_TRUE(static_cast<bool>(run(plain)));
  EXPECT_EQ(fileBytes(file("plain.safetensors")),
            fileBytes(file("fine.safetensors")));
  // Not together with resume.
  fine.resume = file("first.safetensors");
  llvm::Expected<TrainSummary> both = run(fine);
  ASSERT_FALSE(static_cast<bool>(both));
  EXPECT_NE(llvm::toString(both.takeError()).find("not both"),
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

TEST_F(TrainingTest, OutlinedBlocksTrainToTheSameLosses) {
  // Each distinct block compiled once, as a function called per layer
  // (lm-outline-layers, the default), against every layer inline: two
  // block kinds, Transformer-XL memories per layer, residual and expert
  // dropout (whose streams each call must continue where the previous
  // layer's stopped). The same losses and final checkpoint, bit for bit.
  const char *model = R"mlir(
    lm.model @two_kinds(%t: tensor<?x8xi32>, %m0: tensor<?x8x8xf32>, %m1: tensor<?x8x8xf32>) -> (tensor<?x8x256xf32>, tensor<?x8x8xf32>, tensor<?x8x8xf32>) {
      %x0 = lm.embed "embed" %t {vocab = 256} : tensor<?x8xi32> -> tensor<?x8x8xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x8x8xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>, dropout = 0.2, expert_dropout = 0.1} : tensor<?x8x8xf32>
      %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 3, k = 1, expert_dim = 4, dropout = 0.2, expert_dropout = 0.1} : tensor<?x8x8xf32>
      %a1 = lm.switchhead "layers.1.att" %x1 memory(%m1 : tensor<?x8x8xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>, dropout = 0.2, expert_dropout = 0.1} : tensor<?x8x8xf32>
      %x2 = lm.sigma_moe "layers.1.ffn" %a1 {experts = 3, k = 1, expert_dim = 4, dropout = 0.2, expert_dropout = 0.1} : tensor<?x8x8xf32>
      %h = lm.layer_norm "norm" %x2 : tensor<?x8x8xf32>
      %l = lm.output "out" %h {vocab = 256} : tensor<?x8x8xf32> -> tensor<?x8x256xf32>
      lm.return %l, %x0, %x1 : tensor<?x8x256xf32>, tensor<?x8x8xf32>, tensor<?x8x8xf32>
    })mlir";
  std::vector<std::vector<double>> losses;
  for (bool outline : {true, false}) {
    CompileOptions options;
    options.trainStep = true;
    options.outlineLayers = outline;
    llvm::Expected<std::unique_ptr<CpuProgram>> compiled =
        CpuProgram::compile(model, "two-kinds.mlir", options);
    ASSERT_TRUE(static_cast<bool>(compiled))
        << llvm::toString(compiled.takeError());
    losses.push_back(trainLosses(
        **compiled, 4,
        file(outline ? "outlined.safetensors" : "inline.safetensors")));
  }
  ASSERT_EQ(losses[0].size(), 4u);
  for (size_t i = 0; i < losses[0].size(); ++i)
    EXPECT_EQ(losses[0][i], losses[1][i]) << "step " << i + 1;
  EXPECT_EQ(fileBytes(file("outlined.safetensors")),
            fileBytes(file("inline.safetensors")));
}

TEST_F(TrainingTest, ParallelLoopsTrainToTheSameLossesOnAnyThreadCount) {
  // The compiled code's parallel loops (every core by default) split only
  // independent iterations: one compiled program trained on 1 and on 3
  // compute threads gives the same losses and final checkpoint, bit for
  // bit (dropout, experts, XL memory, AdamW included).
  const char *model = R"mlir(
    lm.model @threads(%t: tensor<?x8xi32>, %m0: tensor<?x8x8xf32>) -> (tensor<?x8x256xf32>, tensor<?x8x8xf32>) {
      %x0 = lm.embed "embed" %t {vocab = 256} : tensor<?x8xi32> -> tensor<?x8x8xf32>
      %a0 = lm.switchhead "layers.0.att" %x0 memory(%m0 : tensor<?x8x8xf32>) {heads = 2, experts = 3, k = 2, head_dim = 4, pos = #lm.pos<xl>, dropout = 0.2, expert_dropout = 0.1} : tensor<?x8x8xf32>
      %x1 = lm.sigma_moe "layers.0.ffn" %a0 {experts = 3, k = 1, expert_dim = 4, dropout = 0.2, expert_dropout = 0.1} : tensor<?x8x8xf32>
      %h = lm.layer_norm "norm" %x1 : tensor<?x8x8xf32>
      %l = lm.output "out" %h {vocab = 256} : tensor<?x8x8xf32> -> tensor<?x8x256xf32>
      lm.return %l, %x0 : tensor<?x8x256xf32>, tensor<?x8x8xf32>
    })mlir";
  std::unique_ptr<CpuProgram> compiled =
      compileTrainStep(model, "threads.mlir");
  ASSERT_TRUE(compiled);
  std::vector<std::vector<double>> losses;
  for (unsigned threads : {1u, 3u}) {
    setComputeThreads(threads);
    uint64_t before = parallelLoopsRun();
    losses.push_back(trainLosses(
        *compiled, 4,
        file(threads == 1 ? "threads-1.safetensors" : "threads-3.safetensors")));
    // On 3 threads, loops did run on several.
    EXPECT_EQ(parallelLoopsRun() > before, threads > 1);
  }
  setComputeThreads(0);
  ASSERT_EQ(losses[0].size(), 4u);
  for (size_t i = 0; i < losses[0].size(); ++i)
    EXPECT_EQ(losses[0][i], losses[1][i]) << "step " << i + 1;
  EXPECT_EQ(fileBytes(file("threads-1.safetensors")),
            fileBytes(file("threads-3.safetensors")));
}

namespace {

/// A host tensor of `spec`'s shape and type with deterministic values:
/// token ids in [0, 256) or small floats.
HostTensor filledLike(const TensorSpec &spec, uint64_t seed, const char *name) {
  HostTensor tensor{name, spec.type, spec.shape, {}};
  int64_t count = tensor.numElements();
  if (spec.type == ElementType::i32) {
    std::vector<int32_t> ids(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      ids[size_t(i)] = int32_t((uint64_t(i) * 2654435761u + seed) % 256);
    return HostTensor::fromValues<int32_t>(name, spec.type, spec.shape, ids);
  }
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    values[size_t(i)] =
        0.05f * float(std::sin(double(i) * 0.37 + double(seed)));
  return HostTensor::fromValues<float>(name, spec.type, spec.shape, values);
}

/// Rows [first, first + count) of a [B, T] tensor of ids.
HostTensor rowsOf(const HostTensor &ids, int64_t first, int64_t count) {
  int64_t time = ids.shape[1];
  std::span<const int32_t> all = ids.values<int32_t>();
  std::vector<int32_t> part(all.begin() + first * time,
                            all.begin() + (first + count) * time);
  return HostTensor::fromValues<int32_t>(ids.name, ids.type, {count, time},
                                         part);
}

} // namespace

TEST(DataParallelTest, AveragedGradientsAndTheOptimizerStepAreTheTrainStep) {
  // The pieces of a data-parallel step: `_grad` on each half of a batch of
  // 4, the two gradients (and losses) averaged, then `_optimizer_step`,
  // give `_train_step` on the whole batch: its loss, gradient norm and new
  // parameters and moments, to f32 summation order (1e-5 relative on the
  // loss and the norm, 1e-6 absolute on the state).
  CompileOptions options;
  options.trainStep = true;
  options.optimizerStep = true;
  llvm::Expected<std::unique_ptr<CpuProgram>> compiled =
      CpuProgram::compile(kModel, "small.mlir", options);
  ASSERT_TRUE(static_cast<bool>(compiled))
      << llvm::toString(compiled.takeError());
  CpuProgram &program = **compiled;
  const FunctionSpec *step = program.lookup("small_train_step");
  const FunctionSpec *grad = program.lookup("small_grad");
  const FunctionSpec *update = program.lookup("small_optimizer_step");
  ASSERT_TRUE(step && grad && update);

  // The whole step's arguments, by role, batch 4.
  TensorSpec batchSpec;
  batchSpec.type = ElementType::i32;
  batchSpec.shape = {4, 8};
  HostTensor tokens = filledLike(batchSpec, 1, "tokens");
  HostTensor targets = filledLike(batchSpec, 2, "targets");
  std::vector<HostTensor> params, moments;
  HostTensor hyper = HostTensor::fromValues<float>(
      "hyper", ElementType::f32, {8},
      std::vector<float>{1e-2f, 0.9f, 0.99f, 1e-8f, 0.01f, 0.05f,
                         1 - 0.9f * 0.9f, 1 - 0.99f * 0.99f});
  auto argumentsOf = [&](const FunctionSpec &function, const HostTensor &t,
                         const HostTensor &y,
                         const std::vector<HostTensor> *gradients) {
    std::vector<const HostTensor *> args;
    size_t param = 0, m = 0, v = 0, g = 0;
    for (const TensorSpec &spec : function.arguments) {
      switch (spec.role) {
      case ArgRole::data:
        args.push_back(&t);
        break;
      case ArgRole::targets:
        args.push_back(&y);
        break;
      case ArgRole::param:
        args.push_back(&params[param++]);
        break;
      case ArgRole::adamM:
        args.push_back(&moments[m++]);
        break;
      case ArgRole::adamV:
        args.push_back(&moments[params.size() + v++]);
        break;
      case ArgRole::gradient:
        args.push_back(&(*gradients)[g++]);
        break;
      case ArgRole::hyper:
        args.push_back(&hyper);
        break;
      case ArgRole::seed:
        ADD_FAILURE() << "the model has no dropout seed";
        break;
      }
    }
    return args;
  };
  for (const TensorSpec &spec : step->arguments)
    if (spec.role == ArgRole::param)
      params.push_back(filledLike(spec, params.size(), spec.param.c_str()));
  // Moments from an earlier step: m small, v positive.
  for (int moment = 0; moment < 2; ++moment)
    for (const HostTensor &p : params) {
      TensorSpec spec;
      spec.type = p.type;
      spec.shape = p.shape;
      HostTensor value = filledLike(spec, 7 + moment, "moment");
      if (moment == 1)
        for (float &x : value.values<float>())
          x = x * x;
      moments.push_back(std::move(value));
    }

  llvm::Expected<std::vector<HostTensor>> whole =
      program.call(step->name, argumentsOf(*step, tokens, targets, nullptr));
  ASSERT_TRUE(static_cast<bool>(whole)) << llvm::toString(whole.takeError());

  // Each half's loss and gradients, averaged.
  size_t count = params.size();
  std::vector<HostTensor> gradients;
  double loss = 0;
  for (int64_t half = 0; half < 2; ++half) {
    HostTensor t = rowsOf(tokens, 2 * half, 2);
    HostTensor y = rowsOf(targets, 2 * half, 2);
    llvm::Expected<std::vector<HostTensor>> part =
        program.call(grad->name, argumentsOf(*grad, t, y, nullptr));
    ASSERT_TRUE(static_cast<bool>(part)) << llvm::toString(part.takeError());
    loss += 0.5 * (*part)[0].values<float>()[0];
    for (size_t p = 0; p < count; ++p) {
      HostTensor &g = (*part)[1 + p];
      if (half == 0) {
        gradients.push_back(std::move(g));
        continue;
      }
      std::span<float> sum = gradients[p].values<float>();
      std::span<const float> more = g.values<float>();
      for (size_t i = 0; i < sum.size(); ++i)
        sum[i] = 0.5f * (sum[i] + more[i]);
    }
  }
  llvm::Expected<std::vector<HostTensor>> updated = program.call(
      update->name, argumentsOf(*update, tokens, targets, &gradients));
  ASSERT_TRUE(static_cast<bool>(updated))
      << llvm::toString(updated.takeError());
  ASSERT_EQ(updated->size(), 1 + 3 * count);

  float wholeLoss = (*whole)[0].values<float>()[0];
  float wholeNorm = (*whole)[1].values<float>()[0];
  EXPECT_NEAR(loss, wholeLoss, 1e-5 * std::abs(wholeLoss));
  float norm = (*updated)[0].values<float>()[0];
  EXPECT_NEAR(norm, wholeNorm, 1e-5 * wholeNorm);
  EXPECT_GT(wholeNorm, 0.05f) << "the check should clip";
  for (size_t r = 0; r < 3 * count; ++r) {
    std::span<const float> expected = (*whole)[2 + r].values<float>();
    std::span<const float> actual = (*updated)[1 + r].values<float>();
    ASSERT_EQ(expected.size(), actual.size());
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_NEAR(actual[i], expected[i], 1e-6)
          << "state result #" << r << ", element " << i;
  }
}

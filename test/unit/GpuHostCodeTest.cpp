//===- GpuHostCodeTest.cpp - the GPU backend's host code, without a GPU ---===//
//
// Runs the GPU backend's JIT-compiled host code against the fake driver of
// FakeCudaDriver.cpp (ctest puts it first on LD_LIBRARY_PATH as
// libcuda.so.1): kernels are not run, but everything around them is, on any
// machine. A call loads the kernel modules (the host code's global
// constructors), launches kernels the modules contain, and returns; a
// training step launches the same kernels on every call, as many as the
// kernel report counts, and a program from the compile cache launches what
// the freshly compiled one does.
//
//===----------------------------------------------------------------------===//

#include "runtime/CudaDriver.h"
#include "runtime/Engine/CpuProgram.h"
#include "runtime/Engine/GpuProgram.h"
#include "runtime/Nccl.h"
#include "runtime/Training.h"
#include "test/unit/SmallTraining.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <dlfcn.h>

#include <string>
#include <vector>

namespace rt = switchyard::runtime;
namespace cuda = switchyard::runtime::cuda;

namespace {

/// The fake driver's record (FakeCudaDriver.cpp), from the library the
/// runtime opened.
struct FakeDriver {
  size_t (*launchCount)() = nullptr;
  const char *(*launchName)(size_t) = nullptr;
  size_t (*modulesLoaded)() = nullptr;
  void (*resetLaunches)() = nullptr;
  size_t (*graphsInstantiated)() = nullptr;
  size_t (*graphLaunches)() = nullptr;
  size_t (*liveGraphs)() = nullptr;

  static FakeDriver *get() {
    static FakeDriver driver;
    static bool found = [] {
      void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (!library)
        library = dlopen("libcuda.so.1", RTLD_NOW);
      if (!library)
        return false;
      auto find = [&](const char *name) { return dlsym(library, name); };
      driver.launchCount =
          reinterpret_cast<size_t (*)()>(find("switchyardFakeLaunchCount"));
      driver.launchName = reinterpret_cast<const char *(*)(size_t)>(
          find("switchyardFakeLaunchName"));
      driver.modulesLoaded =
          reinterpret_cast<size_t (*)()>(find("switchyardFakeModulesLoaded"));
      driver.resetLaunches =
          reinterpret_cast<void (*)()>(find("switchyardFakeResetLaunches"));
      driver.graphsInstantiated = reinterpret_cast<size_t (*)()>(
          find("switchyardFakeGraphsInstantiated"));
      driver.graphLaunches =
          reinterpret_cast<size_t (*)()>(find("switchyardFakeGraphLaunches"));
      driver.liveGraphs =
          reinterpret_cast<size_t (*)()>(find("switchyardFakeLiveGraphs"));
      return driver.launchCount && driver.launchName &&
             driver.modulesLoaded && driver.resetLaunches &&
             driver.graphsInstantiated && driver.graphLaunches &&
             driver.liveGraphs;
    }();
    return found ? &driver : nullptr;
  }

  std::vector<std::string> launches() const {
    std::vector<std::string> names;
    for (size_t i = 0, e = launchCount(); i < e; ++i)
      names.push_back(launchName(i));
    return names;
  }
};

/// The fake driver, or a fatal failure: these tests exist to run there.
FakeDriver *fakeDriver() {
  FakeDriver *fake = FakeDriver::get();
  EXPECT_TRUE(fake) << "libcuda.so.1 is not the fake driver of "
                       "FakeCudaDriver.cpp (run these tests through ctest)";
  return fake;
}

using switchyard::test::kSmallModel;

/// A few training steps of `program` on a small byte corpus.
llvm::Expected<rt::TrainSummary> trainBriefly(rt::Program &program) {
  return switchyard::test::trainQuietly(
      program, switchyard::test::smallCorpus(40, 400),
      switchyard::test::smallTrainConfig(/*steps=*/2, /*evalEvery=*/0));
}

TEST(GpuHostCodeTest, ACallLoadsTheKernelsAndLaunchesThem) {
  FakeDriver *fake = fakeDriver();
  ASSERT_TRUE(fake);
  llvm::Expected<cuda::Driver &> driver = cuda::Driver::get();
  ASSERT_TRUE(static_cast<bool>(driver)) << llvm::toString(driver.takeError());
  EXPECT_EQ(driver->device().computeCapability, 90);
  const char *source = R"mlir(
    func.func @relu(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
      %y = moe.relu %x : tensor<4x5xf32>
      return %y : tensor<4x5xf32>
    })mlir";
  auto gpu = rt::GpuProgram::compile(source, "relu.mlir");
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  EXPECT_EQ((*gpu)->chip(), "sm_90");
  size_t modulesBefore = fake->modulesLoaded();
  fake->resetLaunches();
  rt::HostTensor x = rt::HostTensor::fromValues<float>(
      "x", rt::ElementType::f32, {4, 5}, std::vector<float>(20, -1.0f));
  for (int repeat = 1; repeat <= 2; ++repeat) {
    auto result = (*gpu)->call("relu", {&x});
    ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
    ASSERT_EQ(result->size(), 1u);
    EXPECT_EQ((*result)[0].shape, (std::vector<int64_t>{4, 5}));
    // One elementwise kernel per call, found in the module by name.
    EXPECT_EQ(fake->launches(), std::vector<std::string>(
                                    size_t(repeat), "relu_kernel_0"));
  }
  // The module was loaded once, by the first call.
  EXPECT_EQ(fake->modulesLoaded(), modulesBefore + 1);
}

/// The small model with its training step, for the GPU (kernels at -O0).
llvm::Expected<std::unique_ptr<rt::GpuProgram>> compileSmallTraining() {
  rt::CompileOptions options;
  options.trainStep = true;
  options.optLevel = 0;
  return rt::GpuProgram::compile(kSmallModel, "small.mlir", options);
}

TEST(GpuHostCodeTest, TrainingStepsLaunchTheSameKernelsEachStep) {
  FakeDriver *fake = fakeDriver();
  ASSERT_TRUE(fake);
  auto gpu = compileSmallTraining();
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  fake->resetLaunches();
  auto first = trainBriefly(**gpu);
  ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
  std::vector<std::string> once = fake->launches();
  // Dozens of kernels per step (forward, gradients, AdamW), each launch of
  // a kernel its module holds (the fake driver refuses any other).
  EXPECT_GT(once.size(), 40u);
  fake->resetLaunches();
  auto second = trainBriefly(**gpu);
  ASSERT_TRUE(static_cast<bool>(second)) << llvm::toString(second.takeError());
  EXPECT_EQ(fake->launches(), once);
}

/// The fake NCCL's record (FakeNccl.cpp).
struct FakeNccl {
  size_t (*allReduceCount)() = nullptr;
  void (*allReduce)(size_t, size_t *, int *, int *, int *, int *,
                    uint64_t *) = nullptr;
  void (*reset)() = nullptr;
  int (*liveComms)() = nullptr;

  static FakeNccl *get() {
    static FakeNccl nccl;
    static bool found = [] {
      void *library = dlopen("libnccl.so.2", RTLD_NOW);
      if (!library)
        return false;
      auto find = [&](const char *name) { return dlsym(library, name); };
      nccl.allReduceCount = reinterpret_cast<size_t (*)()>(
          find("switchyardFakeNcclAllReduceCount"));
      nccl.allReduce = reinterpret_cast<void (*)(size_t, size_t *, int *, int *,
                                                 int *, int *, uint64_t *)>(
          find("switchyardFakeNcclAllReduce"));
      nccl.reset =
          reinterpret_cast<void (*)()>(find("switchyardFakeNcclReset"));
      nccl.liveComms =
          reinterpret_cast<int (*)()>(find("switchyardFakeNcclLiveComms"));
      return nccl.allReduceCount && nccl.allReduce && nccl.reset &&
             nccl.liveComms;
    }();
    return found ? &nccl : nullptr;
  }
};

TEST(GpuHostCodeTest, NcclAveragesTheGradientsInDeviceMemory) {
  FakeDriver *fake = fakeDriver();
  ASSERT_TRUE(fake);
  FakeNccl *nccl = FakeNccl::get();
  ASSERT_TRUE(nccl) << "libnccl.so.2 is not the fake of FakeNccl.cpp";
  rt::CompileOptions options;
  options.trainStep = true;
  options.optimizerStep = true;
  options.optLevel = 0;
  auto gpu = rt::GpuProgram::compile(kSmallModel, "small.mlir", options);
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  {
    llvm::Expected<std::unique_ptr<rt::NcclGroup>> group =
        rt::NcclGroup::create(nullptr);
    ASSERT_TRUE(static_cast<bool>(group)) << llvm::toString(group.takeError());
    EXPECT_EQ((*group)->describe(), "NCCL 2.27.7, 1 rank");
    EXPECT_EQ(nccl->liveComms(), 1);
    nccl->reset();
    fake->resetLaunches();
    rt::TrainConfig config =
        switchyard::test::smallTrainConfig(/*steps=*/2, /*evalEvery=*/0);
    config.nccl = group->get();
    auto summary = switchyard::test::trainQuietly(
        **gpu, switchyard::test::smallCorpus(40, 400), config);
    ASSERT_TRUE(static_cast<bool>(summary))
        << llvm::toString(summary.takeError());
    for (const rt::StepRecord &step : summary->steps)
      EXPECT_GT(step.averagingSeconds, 0);
    // Each step: the loss and every gradient, in the parameters' order,
    // averaged in place (ncclFloat32, ncclAvg) in one group of calls, on
    // buffers of the fake driver's memory.
    const std::vector<rt::ParamSpec> &params = (*gpu)->params().params;
    size_t perStep = params.size() + 1;
    ASSERT_EQ(nccl->allReduceCount(), 2 * perStep);
    for (size_t i = 0; i < 2 * perStep; ++i) {
      SCOPED_TRACE(i);
      size_t count = 0;
      int type = 0, op = 0, inPlace = 0, grouped = 0;
      uint64_t address = 0;
      nccl->allReduce(i, &count, &type, &op, &inPlace, &grouped, &address);
      size_t index = i % perStep;
      size_t expected = 1;
      if (index > 0)
        for (int64_t size : params[index - 1].shape)
          expected *= size_t(size);
      EXPECT_EQ(count, expected);
      EXPECT_EQ(type, 7);
      EXPECT_EQ(op, 4);
      EXPECT_TRUE(inPlace);
      EXPECT_TRUE(grouped);
      EXPECT_NE(address, 0u);
    }
    // The steps ran `_grad` and `_optimizer_step`'s kernels.
    EXPECT_GT(fake->launches().size(), 40u);
  }
  EXPECT_EQ(nccl->liveComms(), 0);

  // The CPU backend's ranks average on the host.
  auto cpu = rt::CpuProgram::compile(kSmallModel, "small.mlir", options);
  ASSERT_TRUE(static_cast<bool>(cpu)) << llvm::toString(cpu.takeError());
  llvm::Expected<std::unique_ptr<rt::NcclGroup>> group =
      rt::NcclGroup::create(nullptr);
  ASSERT_TRUE(static_cast<bool>(group)) << llvm::toString(group.takeError());
  rt::TrainConfig config =
      switchyard::test::smallTrainConfig(/*steps=*/1, /*evalEvery=*/0);
  config.nccl = group->get();
  auto refused = switchyard::test::trainQuietly(
      **cpu, switchyard::test::smallCorpus(40, 400), config);
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_EQ(llvm::toString(refused.takeError()),
            "the cpu backend keeps its tensors in host memory: its ranks "
            "average them through MPI, not NCCL");
}

TEST(GpuHostCodeTest, TrainingStepsTakeTheirTemporariesFromAMemoryPlan) {
  FakeDriver *fake = fakeDriver();
  ASSERT_TRUE(fake);
  auto gpu = compileSmallTraining();
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  fake->resetLaunches();
  auto unplanned = trainBriefly(**gpu);
  ASSERT_TRUE(static_cast<bool>(unplanned))
      << llvm::toString(unplanned.takeError());
  std::vector<std::string> launches = fake->launches();

  // With plans on: the first step records its allocations, the steps after
  // it take them from the arena, and launch the same kernels.
  ASSERT_EQ(setenv("SWITCHYARD_MEMORY_PLAN", "1", 1), 0);
  fake->resetLaunches();
  auto first = trainBriefly(**gpu);
  auto second = trainBriefly(**gpu);
  unsetenv("SWITCHYARD_MEMORY_PLAN");
  ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
  ASSERT_TRUE(static_cast<bool>(second)) << llvm::toString(second.takeError());
  std::vector<std::string> twice = launches;
  twice.insert(twice.end(), launches.begin(), launches.end());
  EXPECT_EQ(fake->launches(), twice);

  llvm::Expected<cuda::Driver &> driver = cuda::Driver::get();
  ASSERT_TRUE(static_cast<bool>(driver)) << llvm::toString(driver.takeError());
  const rt::MemoryPlan *step = nullptr;
  for (const std::string &key : driver->memoryPlanKeys())
    if (llvm::StringRef(key).contains("_train_step;"))
      step = driver->memoryPlan(key);
  ASSERT_TRUE(step) << "no plan for the training step";
  // Four steps: one recorded, three replayed, none strayed.
  EXPECT_EQ(step->recordedCalls(), 1u);
  EXPECT_EQ(step->replayedCalls(), 3u);
  EXPECT_EQ(step->strayedCalls(), 0u);
  EXPECT_TRUE(step->planned());
  // Temporaries that do not live at once share the arena.
  EXPECT_GT(step->arenaBytes(), 0u);
  EXPECT_LT(step->arenaBytes(), step->plannedBytes());
}

TEST(GpuHostCodeTest, TrainingStepsReplayAsCudaGraphs) {
  FakeDriver *fake = fakeDriver();
  ASSERT_TRUE(fake);
  auto gpu = compileSmallTraining();
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  fake->resetLaunches();
  auto plain = trainBriefly(**gpu);
  ASSERT_TRUE(static_cast<bool>(plain)) << llvm::toString(plain.takeError());
  std::vector<std::string> launches = fake->launches();

  // With graphs on, the first step records the plans and runs the host
  // code; the second captures its launches (the host code's
  // synchronisations and streams folded into the capturing stream) and
  // replays them; each training run ends by releasing its state, so the
  // second run's first step replays that graph, and its second step, whose
  // arguments are the outputs the first lent, captures another.
  ASSERT_EQ(setenv("SWITCHYARD_CUDA_GRAPHS", "1", 1), 0);
  fake->resetLaunches();
  size_t instantiated = fake->graphsInstantiated();
  size_t replays = fake->graphLaunches();
  auto first = trainBriefly(**gpu);
  auto second = trainBriefly(**gpu);
  auto third = trainBriefly(**gpu);
  unsetenv("SWITCHYARD_CUDA_GRAPHS");
  ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
  ASSERT_TRUE(static_cast<bool>(second)) << llvm::toString(second.takeError());
  ASSERT_TRUE(static_cast<bool>(third)) << llvm::toString(third.takeError());
  // Every step launched the same kernels in the same order, by the host
  // code or by a graph.
  std::vector<std::string> thrice;
  for (int run = 0; run < 3; ++run)
    thrice.insert(thrice.end(), launches.begin(), launches.end());
  EXPECT_EQ(fake->launches(), thrice);
  // Two training-step graphs and one of the evaluation at the end of each
  // run (recorded in the first run, captured in the second); the third run
  // captures nothing new. Replays: the steps 2 of the first run, all of
  // the second's and third's (four), and the evaluations of the second
  // and third.
  size_t made = fake->graphsInstantiated() - instantiated;
  EXPECT_EQ(made, 3u);
  EXPECT_EQ(fake->graphLaunches() - replays, 7u);
  // The program's graphs go with it.
  size_t live = fake->liveGraphs();
  EXPECT_GE(live, made);
  gpu->reset();
  EXPECT_EQ(fake->liveGraphs(), live - made);
}

TEST(GpuHostCodeTest, TheKernelReportCountsTheLaunchesOfAStep) {
  FakeDriver *fake = fakeDriver();
  ASSERT_TRUE(fake);
  llvm::SmallString<128> report;
  ASSERT_FALSE(
      llvm::sys::fs::createTemporaryFile("sy-kernel-report", "txt", report));
  rt::CompileOptions options;
  options.trainStep = true;
  options.optLevel = 0;
  rt::GpuTargetOptions target;
  target.kernelReport = std::string(report);
  auto gpu = rt::GpuProgram::compile(kSmallModel, "small.mlir", options, target);
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  auto text = llvm::MemoryBuffer::getFile(report);
  ASSERT_TRUE(static_cast<bool>(text));
  (void)llvm::sys::fs::remove(report);
  // "launches per call: @small N, @small_grad M, @small_train_step K"
  llvm::StringRef all = (*text)->getBuffer();
  auto perCall = [&](llvm::StringRef function) {
    llvm::StringRef line = all.substr(all.find("launches per call:"));
    std::string key = ("@" + function + " ").str();
    size_t at = line.find(key);
    size_t count = 0;
    if (at == llvm::StringRef::npos ||
        line.substr(at + key.size()).consumeInteger(10, count))
      ADD_FAILURE() << "no count for @" << function.str() << " in\n"
                    << all.str();
    return count;
  };
  size_t step = perCall("small_train_step"), forward = perCall("small");
  EXPECT_GT(step, perCall("small_grad"));

  fake->resetLaunches();
  auto trained = trainBriefly(**gpu);
  ASSERT_TRUE(static_cast<bool>(trained))
      << llvm::toString(trained.takeError());
  // The steps, then the evaluation at the end (one batch: one call of the
  // forward function).
  ASSERT_EQ(trained->evals.size(), 1u);
  EXPECT_EQ(fake->launchCount(), step * trained->steps.size() + forward);
}

TEST(GpuHostCodeTest, AProgramFromTheCacheLaunchesWhatTheCompiledOneDoes) {
  FakeDriver *fake = fakeDriver();
  ASSERT_TRUE(fake);
  llvm::SmallString<128> directory;
  ASSERT_FALSE(
      llvm::sys::fs::createUniqueDirectory("sy-host-code-test", directory));
  rt::CompileOptions options;
  options.trainStep = true;
  options.optLevel = 0;
  options.cacheDirectory = std::string(directory);
  auto compiled = rt::GpuProgram::compile(kSmallModel, "small.mlir", options);
  ASSERT_TRUE(static_cast<bool>(compiled))
      << llvm::toString(compiled.takeError());
  ASSERT_TRUE((*compiled)->cacheReport().starts_with("stored "))
      << (*compiled)->cacheReport().str();
  auto cached = rt::GpuProgram::compile(kSmallModel, "small.mlir", options);
  ASSERT_TRUE(static_cast<bool>(cached)) << llvm::toString(cached.takeError());
  ASSERT_TRUE((*cached)->cacheReport().starts_with("hit "))
      << (*cached)->cacheReport().str();

  fake->resetLaunches();
  auto fromCompiled = trainBriefly(**compiled);
  ASSERT_TRUE(static_cast<bool>(fromCompiled))
      << llvm::toString(fromCompiled.takeError());
  std::vector<std::string> expected = fake->launches();
  fake->resetLaunches();
  auto fromCache = trainBriefly(**cached);
  ASSERT_TRUE(static_cast<bool>(fromCache))
      << llvm::toString(fromCache.takeError());
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(fake->launches(), expected);
  (void)llvm::sys::fs::remove_directories(directory);
}

} // namespace

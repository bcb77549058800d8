//===- GpuProgramTest.cpp - the GPU backend without and with a GPU --------===//
//
// Compiling for the GPU needs no GPU: the tiny SwitchHead model's train step
// compiles through GpuProgram on any machine with the CUDA toolkit, with the
// same signatures, argument roles and parameters as through CpuProgram (both
// come from the one shared compilation to linalg), and its host code's
// mgpu* declarations match the runtime's wrappers. Without a driver a call
// fails with a message saying so, before running anything. With a GPU, a
// small function's results are compared with the CPU backend's; those tests
// are SKIPPED, never passed, where no GPU is present, and so are those of
// the resident tensors (DeviceTensor handles: upload, calls mixing handles
// and host tensors, kept results, aliasing results, download, and a few
// training steps with the state on the device). (The full comparison of
// every op and of training is test/Integration/CUDA.)
//
//===----------------------------------------------------------------------===//

#include "runtime/Engine/CpuProgram.h"
#include "runtime/CudaDriver.h"
#include "runtime/Engine/GpuProgram.h"
#include "runtime/Training.h"
#include "test/unit/SmallTraining.h"

#include "llvm/Support/FileSystem.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <string>

#include <cmath>

namespace rt = switchyard::runtime;
namespace cuda = switchyard::runtime::cuda;

namespace {

// $SWITCHYARD_SOURCE_DIR overrides the build's source directory (the device
// bundle runs this test in another checkout).
const std::string kModelPath =
    std::string(std::getenv("SWITCHYARD_SOURCE_DIR")
                    ? std::getenv("SWITCHYARD_SOURCE_DIR")
                    : SWITCHYARD_SOURCE_DIR) +
    "/examples/models/switchhead-tiny.mlir";
const char *kModel = kModelPath.c_str();

/// Equal signatures: names, argument and result types, shapes, roles,
/// parameter names and vocabularies.
void expectSameSignatures(const rt::Program &cpu, const rt::Program &gpu) {
  ASSERT_EQ(cpu.functions().size(), gpu.functions().size());
  for (size_t f = 0; f < cpu.functions().size(); ++f) {
    const rt::FunctionSpec &a = cpu.functions()[f], &b = gpu.functions()[f];
    EXPECT_EQ(a.name, b.name);
    ASSERT_EQ(a.arguments.size(), b.arguments.size()) << a.name;
    for (size_t i = 0; i < a.arguments.size(); ++i) {
      const rt::TensorSpec &x = a.arguments[i], &y = b.arguments[i];
      EXPECT_EQ(x.type, y.type) << a.name << " argument #" << i;
      EXPECT_EQ(x.shape, y.shape) << a.name << " argument #" << i;
      EXPECT_EQ(x.role, y.role) << a.name << " argument #" << i;
      EXPECT_EQ(x.param, y.param) << a.name << " argument #" << i;
      EXPECT_EQ(x.vocab, y.vocab) << a.name << " argument #" << i;
    }
    ASSERT_EQ(a.results.size(), b.results.size()) << a.name;
    for (size_t i = 0; i < a.results.size(); ++i) {
      EXPECT_EQ(a.results[i].type, b.results[i].type) << a.name;
      EXPECT_EQ(a.results[i].shape, b.results[i].shape) << a.name;
    }
  }
  ASSERT_EQ(cpu.params().params.size(), gpu.params().params.size());
  for (size_t p = 0; p < cpu.params().params.size(); ++p) {
    EXPECT_EQ(cpu.params().params[p].name, gpu.params().params[p].name);
    EXPECT_EQ(cpu.params().params[p].shape, gpu.params().params[p].shape);
  }
}

TEST(GpuProgramTest, TinyTrainStepCompilesWithoutAGpuWithTheCpuSignatures) {
  rt::CompileOptions options;
  options.trainStep = true;
  // Signatures only: the host code at -O0 (LLVM's time is most of the
  // test's).
  options.optLevel = 0;
  llvm::Expected<std::unique_ptr<rt::CpuProgram>> cpu =
      rt::CpuProgram::compileFile(kModel, options);
  ASSERT_TRUE(static_cast<bool>(cpu)) << llvm::toString(cpu.takeError());
  // ptxas at -O0 keeps the test short; the chip is fixed so that the test
  // means the same on every machine.
  rt::GpuTargetOptions gpuOptions;
  gpuOptions.chip = "sm_80";
  gpuOptions.optLevel = 0;
  llvm::Expected<std::unique_ptr<rt::GpuProgram>> gpu =
      rt::GpuProgram::compileFile(kModel, options, gpuOptions);
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  EXPECT_EQ((*gpu)->chip(), "sm_80");
  EXPECT_EQ((*gpu)->backend(), "gpu");
  EXPECT_EQ((*cpu)->backend(), "cpu");
  ASSERT_NE((*gpu)->lookup("switchhead_tiny_train_step"), nullptr);
  expectSameSignatures(**cpu, **gpu);
}

const char *kAdd = R"mlir(
  func.func @add(%a: tensor<5xf32>, %b: tensor<5xf32>) -> tensor<5xf32> {
    %e = tensor.empty() : tensor<5xf32>
    %r = linalg.add ins(%a, %b : tensor<5xf32>, tensor<5xf32>) outs(%e : tensor<5xf32>) -> tensor<5xf32>
    return %r : tensor<5xf32>
  }
  func.func @same(%a: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
    return %a, %a : tensor<3xf32>, tensor<3xf32>
  })mlir";

// The compile cache keeps the GPU code generation's output: a hit loads
// the same functions and parameters for the same chip; another chip is
// another entry; on a GPU, a program from the cache computes what the
// compiled one does.
TEST(GpuProgramTest, ProgramsLoadFromTheCompileCache) {
  llvm::SmallString<128> directory;
  ASSERT_FALSE(
      llvm::sys::fs::createUniqueDirectory("sy-gpu-cache-test", directory));
  rt::CompileOptions options;
  options.trainStep = true;
  options.optLevel = 0;
  options.cacheDirectory = std::string(directory);
  rt::GpuTargetOptions gpuOptions;
  gpuOptions.chip = "sm_80";
  gpuOptions.optLevel = 0;
  llvm::Expected<std::unique_ptr<rt::GpuProgram>> cold =
      rt::GpuProgram::compileFile(kModel, options, gpuOptions);
  ASSERT_TRUE(static_cast<bool>(cold)) << llvm::toString(cold.takeError());
  EXPECT_TRUE((*cold)->cacheReport().starts_with("stored "))
      << (*cold)->cacheReport().str();
  llvm::Expected<std::unique_ptr<rt::GpuProgram>> hit =
      rt::GpuProgram::compileFile(kModel, options, gpuOptions);
  ASSERT_TRUE(static_cast<bool>(hit)) << llvm::toString(hit.takeError());
  EXPECT_TRUE((*hit)->cacheReport().starts_with("hit "))
      << (*hit)->cacheReport().str();
  EXPECT_EQ((*hit)->chip(), "sm_80");
  EXPECT_EQ((*hit)->params().params.size(), (*cold)->params().params.size());
  expectSameSignatures(**cold, **hit);
  // Another chip is another entry.
  gpuOptions.chip = "sm_90";
  llvm::Expected<std::unique_ptr<rt::GpuProgram>> other =
      rt::GpuProgram::compileFile(kModel, options, gpuOptions);
  ASSERT_TRUE(static_cast<bool>(other)) << llvm::toString(other.takeError());
  EXPECT_TRUE((*other)->cacheReport().starts_with("stored "));

  if (cuda::Driver::available()) {
    rt::CompileOptions plain;
    plain.cacheDirectory = std::string(directory);
    auto first = rt::GpuProgram::compile(kAdd, "add.mlir", plain);
    auto second = rt::GpuProgram::compile(kAdd, "add.mlir", plain);
    ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
    ASSERT_TRUE(static_cast<bool>(second))
        << llvm::toString(second.takeError());
    EXPECT_TRUE((*second)->cacheReport().starts_with("hit "));
    rt::HostTensor a = rt::HostTensor::fromValues<float>(
        "", rt::ElementType::f32, {5}, {1, 2, 3, 4, 5});
    auto expected = (*first)->call("add", {&a, &a});
    auto actual = (*second)->call("add", {&a, &a});
    ASSERT_TRUE(static_cast<bool>(expected))
        << llvm::toString(expected.takeError());
    ASSERT_TRUE(static_cast<bool>(actual)) << llvm::toString(actual.takeError());
    EXPECT_EQ((*actual)[0].bytes, (*expected)[0].bytes);
  }
  (void)llvm::sys::fs::remove_directories(directory);
  llvm::consumeError(cuda::takeDeferredError());
}

TEST(GpuProgramTest, CallsFailCleanlyWithoutADriver) {
  if (cuda::Driver::available())
    GTEST_SKIP() << "a CUDA driver and device are present";
  llvm::Expected<std::unique_ptr<rt::GpuProgram>> gpu =
      rt::GpuProgram::compile(kAdd, "add.mlir");
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  EXPECT_EQ((*gpu)->chip(), "sm_80") << "the default without a device";
  rt::HostTensor a = rt::HostTensor::fromValues<float>(
      "", rt::ElementType::f32, {5}, {1, 2, 3, 4, 5});
  // Argument checks come first and need no driver.
  llvm::Expected<std::vector<rt::HostTensor>> wrong = (*gpu)->call("add", {&a});
  ASSERT_FALSE(static_cast<bool>(wrong));
  EXPECT_EQ(llvm::toString(wrong.takeError()), "@add takes 2 arguments, 1 given");
  llvm::Expected<std::vector<rt::HostTensor>> result =
      (*gpu)->call("add", {&a, &a});
  ASSERT_FALSE(static_cast<bool>(result));
  std::string message = llvm::toString(result.takeError());
  EXPECT_NE(message.find("calling @add on the GPU: "), std::string::npos)
      << message;
  EXPECT_TRUE(message.find("no CUDA driver") != std::string::npos ||
              message.find("CUDA:") != std::string::npos)
      << message;
  // Nothing was left deferred for the next caller.
  llvm::Error deferred = cuda::takeDeferredError();
  EXPECT_FALSE(static_cast<bool>(deferred)) << llvm::toString(std::move(deferred));
}

TEST(GpuProgramTest, UnsupportedChipsAreCompileErrors) {
  rt::GpuTargetOptions gpuOptions;
  gpuOptions.chip = "sm_61";
  llvm::Expected<std::unique_ptr<rt::GpuProgram>> gpu =
      rt::GpuProgram::compile(kAdd, "add.mlir", {}, gpuOptions);
  ASSERT_FALSE(static_cast<bool>(gpu));
  std::string message = llvm::toString(gpu.takeError());
  EXPECT_NE(message.find("chip: expected one of sm_75"), std::string::npos)
      << message;
  EXPECT_NE(message.find("found 'sm_61'"), std::string::npos) << message;
}

// moe.linear with N = K = 128 takes the wgmma + TMA route on sm_90a: its
// host code calls mgpuTensorMapEncodeTiledMemref, which compile() checks
// against the runtime's wrapper (name and LLVM type).
constexpr const char *kLinear = R"mlir(
func.func @linear(%x: tensor<?x128xf32>, %w: tensor<128x128xf32>) -> tensor<?x128xf32> {
  %y = moe.linear %x, %w : tensor<?x128xf32>, tensor<128x128xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
)mlir";

rt::GpuTargetOptions wgmmaOptions() {
  rt::GpuTargetOptions options;
  options.chip = "sm_90a";
  options.elementType = "f16";
  options.wgmma = true;
  return options;
}

TEST(GpuProgramTest, WgmmaHostCodeFindsTheTensorMapWrapper) {
  auto gpu = rt::GpuProgram::compile(kLinear, "linear.mlir", {}, wgmmaOptions());
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
}

// With an sm_90 GPU: the wgmma route against the CPU with the factors
// rounded to f16 (products exact in f32; only the order of the f32
// accumulation differs: 1e-4 + 1e-3·|cpu| for K = 128 and |x|, |w| < 1).
TEST(GpuProgramTest, WgmmaMatchesTheRoundedCpuReference) {
  llvm::Expected<cuda::Driver &> driver = cuda::Driver::get();
  if (!driver)
    GTEST_SKIP() << llvm::toString(driver.takeError());
  if (driver->device().computeCapability != 90)
    GTEST_SKIP() << "needs sm_90 (wgmma, TMA)";
  rt::CompileOptions cpuOptions;
  cpuOptions.roundContractionOperands = "f16";
  auto cpu = rt::CpuProgram::compile(kLinear, "linear.mlir", cpuOptions);
  ASSERT_TRUE(static_cast<bool>(cpu)) << llvm::toString(cpu.takeError());
  auto gpu = rt::GpuProgram::compile(kLinear, "linear.mlir", {}, wgmmaOptions());
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  for (int64_t rows : {1, 63, 64, 65, 200}) {
    std::vector<float> x(size_t(rows) * 128), w(128 * 128);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::sin(0.37f * float(i));
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = std::cos(0.11f * float(i));
    rt::HostTensor xt = rt::HostTensor::fromValues<float>(
        "x", rt::ElementType::f32, {rows, 128}, x);
    rt::HostTensor wt = rt::HostTensor::fromValues<float>(
        "w", rt::ElementType::f32, {128, 128}, w);
    auto expected = (*cpu)->call("linear", {&xt, &wt});
    ASSERT_TRUE(static_cast<bool>(expected))
        << llvm::toString(expected.takeError());
    auto actual = (*gpu)->call("linear", {&xt, &wt});
    ASSERT_TRUE(static_cast<bool>(actual))
        << llvm::toString(actual.takeError());
    auto e = (*expected)[0].values<float>();
    auto a = (*actual)[0].values<float>();
    ASSERT_EQ(e.size(), a.size());
    for (size_t i = 0; i < e.size(); ++i)
      ASSERT_LE(std::fabs(a[i] - e[i]), 1e-4 + 1e-3 * std::fabs(e[i]))
          << "rows " << rows << ", element " << i;
  }
}

// With a GPU: results against the CPU backend, including results that alias
// an argument (returned as they are, and not released twice).
TEST(GpuProgramTest, SmallFunctionsMatchTheCpuBackend) {
  llvm::Expected<cuda::Driver &> driver = cuda::Driver::get();
  if (!driver)
    GTEST_SKIP() << llvm::toString(driver.takeError());
  auto cpu = rt::CpuProgram::compile(kAdd, "add.mlir");
  ASSERT_TRUE(static_cast<bool>(cpu)) << llvm::toString(cpu.takeError());
  auto gpu = rt::GpuProgram::compile(kAdd, "add.mlir");
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  rt::HostTensor a = rt::HostTensor::fromValues<float>(
      "", rt::ElementType::f32, {5}, {1, 2, 3, 4, 5});
  rt::HostTensor b = rt::HostTensor::fromValues<float>(
      "", rt::ElementType::f32, {5}, {0.5f, -2, 7, 1e3f, -1e-3f});
  rt::HostTensor c = rt::HostTensor::fromValues<float>(
      "", rt::ElementType::f32, {3}, {9, 8, 7});
  for (int repeat = 0; repeat < 3; ++repeat) {
    auto expected = (*cpu)->call("add", {&a, &b});
    auto actual = (*gpu)->call("add", {&a, &b});
    ASSERT_TRUE(static_cast<bool>(expected))
        << llvm::toString(expected.takeError());
    ASSERT_TRUE(static_cast<bool>(actual)) << llvm::toString(actual.takeError());
    ASSERT_EQ(actual->size(), 1u);
    EXPECT_EQ((*actual)[0].shape, std::vector<int64_t>{5});
    // One f32 addition each: both backends round the same way.
    EXPECT_EQ((*actual)[0].bytes, (*expected)[0].bytes);
    auto same = (*gpu)->call("same", {&c});
    ASSERT_TRUE(static_cast<bool>(same)) << llvm::toString(same.takeError());
    ASSERT_EQ(same->size(), 2u);
    EXPECT_EQ((*same)[0].bytes, c.bytes);
    EXPECT_EQ((*same)[1].bytes, c.bytes);
  }
}

TEST(GpuProgramTest, ResidentTensorsNeedADriver) {
  if (cuda::Driver::available())
    GTEST_SKIP() << "a CUDA driver and device are present";
  auto gpu = rt::GpuProgram::compile(kAdd, "add.mlir");
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  rt::HostTensor a = rt::HostTensor::fromValues<float>(
      "a", rt::ElementType::f32, {5}, {1, 2, 3, 4, 5});
  llvm::Expected<std::unique_ptr<rt::DeviceTensor>> handle =
      (*gpu)->upload(a);
  ASSERT_FALSE(static_cast<bool>(handle));
  std::string message = llvm::toString(handle.takeError());
  EXPECT_NE(message.find("uploading 'a' to the GPU: "), std::string::npos)
      << message;
  // A CPU handle is refused before the driver is looked for.
  auto cpu = rt::CpuProgram::compile(kAdd, "add.mlir");
  ASSERT_TRUE(static_cast<bool>(cpu)) << llvm::toString(cpu.takeError());
  llvm::Expected<std::unique_ptr<rt::DeviceTensor>> onCpu = (*cpu)->upload(a);
  ASSERT_TRUE(static_cast<bool>(onCpu));
  llvm::Expected<std::vector<rt::CallResult>> refused =
      (*gpu)->callResident("add", {&a, onCpu->get()}, {});
  ASSERT_FALSE(static_cast<bool>(refused));
  message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find("is held by the cpu backend"), std::string::npos)
      << message;
}

// With a GPU: handles in device memory, kept results (adopted or copied when
// they alias an argument or each other), downloads, and results equal to
// the plain calls.
TEST(GpuProgramTest, ResidentTensorsStayOnTheDevice) {
  llvm::Expected<cuda::Driver &> driver = cuda::Driver::get();
  if (!driver)
    GTEST_SKIP() << llvm::toString(driver.takeError());
  auto gpu = rt::GpuProgram::compile(kAdd, "add.mlir");
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  rt::HostTensor a = rt::HostTensor::fromValues<float>(
      "a", rt::ElementType::f32, {5}, {1, 2, 3, 4, 5});
  rt::HostTensor b = rt::HostTensor::fromValues<float>(
      "b", rt::ElementType::f32, {5}, {0.5f, -2, 7, 1e3f, -1e-3f});
  auto expected = (*gpu)->call("add", {&a, &b});
  ASSERT_TRUE(static_cast<bool>(expected))
      << llvm::toString(expected.takeError());
  auto handleA = (*gpu)->upload(a);
  ASSERT_TRUE(static_cast<bool>(handleA))
      << llvm::toString(handleA.takeError());
  EXPECT_EQ((*handleA)->backend(), "gpu");
  auto back = (*gpu)->download(**handleA);
  ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->bytes, a.bytes);

  // Chained: x = a + b kept on the device, then x + b from the handle.
  std::unique_ptr<rt::DeviceTensor> x;
  for (int step = 0; step < 3; ++step) {
    std::vector<rt::CallArgument> args = {
        x ? rt::CallArgument(x.get()) : rt::CallArgument(handleA->get()), &b};
    auto kept = (*gpu)->callResident("add", args, {true});
    ASSERT_TRUE(static_cast<bool>(kept)) << llvm::toString(kept.takeError());
    ASSERT_TRUE((*kept)[0].device);
    x = std::move((*kept)[0].device); // the old handle goes back to the pool
  }
  auto chained = (*gpu)->download(*x);
  ASSERT_TRUE(static_cast<bool>(chained));
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(chained->values<float>()[i],
              ((a.values<float>()[i] + b.values<float>()[i]) +
               b.values<float>()[i]) +
                  b.values<float>()[i]);

  // @same (of a tensor<3xf32>) returns its argument twice: both kept
  // results are copies, and the argument's handle stays valid and unchanged.
  rt::HostTensor c = rt::HostTensor::fromValues<float>(
      "c", rt::ElementType::f32, {3}, {9, 8, 7});
  auto handleC = (*gpu)->upload(c);
  ASSERT_TRUE(static_cast<bool>(handleC))
      << llvm::toString(handleC.takeError());
  auto same = (*gpu)->callResident("same", {handleC->get()}, {true, true});
  ASSERT_TRUE(static_cast<bool>(same)) << llvm::toString(same.takeError());
  ASSERT_EQ(same->size(), 2u);
  for (rt::CallResult &result : *same) {
    ASSERT_TRUE(result.device);
    auto copy = (*gpu)->download(*result.device);
    ASSERT_TRUE(static_cast<bool>(copy));
    EXPECT_EQ(copy->bytes, c.bytes);
  }
  same->clear();
  auto still = (*gpu)->download(**handleC);
  ASSERT_TRUE(static_cast<bool>(still));
  EXPECT_EQ(still->bytes, c.bytes);
  // A handle of the wrong shape is refused by name, not read past its end.
  auto wrong = (*gpu)->callResident("same", {handleA->get()}, {true, true});
  ASSERT_FALSE(static_cast<bool>(wrong));
  std::string message = llvm::toString(wrong.takeError());
  EXPECT_NE(message.find("expected shape [3], found [5]"), std::string::npos)
      << message;
}

// With a GPU: a few training steps with the state on the device agree with
// the CPU backend (loss and gradient norm to 1e-4 + 2e-3 |cpu|).
TEST(GpuProgramTest, TrainingKeepsTheStateOnTheDevice) {
  llvm::Expected<cuda::Driver &> driver = cuda::Driver::get();
  if (!driver)
    GTEST_SKIP() << llvm::toString(driver.takeError());
  rt::CompileOptions options;
  options.trainStep = true;
  auto cpu = rt::CpuProgram::compile(switchyard::test::kSmallModel,
                                     "small.mlir", options);
  ASSERT_TRUE(static_cast<bool>(cpu)) << llvm::toString(cpu.takeError());
  auto gpu = rt::GpuProgram::compile(switchyard::test::kSmallModel,
                                     "small.mlir", options);
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  rt::TokenCorpus corpus = switchyard::test::smallCorpus(60, 600);
  rt::TrainConfig config = switchyard::test::smallTrainConfig(4, 2);
  auto run = [&](rt::Program &program) {
    return switchyard::test::trainQuietly(program, corpus, config);
  };
  auto expected = run(**cpu);
  ASSERT_TRUE(static_cast<bool>(expected))
      << llvm::toString(expected.takeError());
  uint64_t poolBefore = driver->poolBytes();
  auto actual = run(**gpu);
  ASSERT_TRUE(static_cast<bool>(actual)) << llvm::toString(actual.takeError());
  auto close = [](double gpu, double cpu) {
    return std::abs(gpu - cpu) <= 1e-4 + 2e-3 * std::abs(cpu);
  };
  ASSERT_EQ(actual->steps.size(), expected->steps.size());
  for (size_t i = 0; i < expected->steps.size(); ++i) {
    EXPECT_PRED2(close, actual->steps[i].loss, expected->steps[i].loss);
    EXPECT_PRED2(close, actual->steps[i].gradNorm,
                 expected->steps[i].gradNorm);
  }
  ASSERT_EQ(actual->evals.size(), expected->evals.size());
  for (size_t i = 0; i < expected->evals.size(); ++i)
    EXPECT_PRED2(close, actual->evals[i].loss, expected->evals[i].loss);
  // The pool reuses the released state: a second run needs no more memory.
  uint64_t poolAfterFirst = driver->poolBytes();
  auto again = run(**gpu);
  ASSERT_TRUE(static_cast<bool>(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(driver->poolBytes(), poolAfterFirst);
  EXPECT_GE(poolAfterFirst, poolBefore);
}

TEST(GpuProgramTest, CudaGraphsGiveTheResultsOfDirectCalls) {
  llvm::Expected<cuda::Driver &> driver = cuda::Driver::get();
  if (!driver)
    GTEST_SKIP() << llvm::toString(driver.takeError());
  rt::CompileOptions options;
  options.trainStep = true;
  auto gpu = rt::GpuProgram::compile(switchyard::test::kSmallModel,
                                     "small.mlir", options);
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  rt::TokenCorpus corpus = switchyard::test::smallCorpus(60, 600);
  rt::TrainConfig config = switchyard::test::smallTrainConfig(6, 2);
  auto run = [&] { return switchyard::test::trainQuietly(**gpu, corpus, config); };
  auto direct = run();
  ASSERT_TRUE(static_cast<bool>(direct)) << llvm::toString(direct.takeError());
  // Steps 1 and 2 record the plans and capture; the steps after replay two
  // graphs in turn (each step keeps the state the graph before it lent).
  ASSERT_EQ(setenv("SWITCHYARD_CUDA_GRAPHS", "1", 1), 0);
  auto replayed = run();
  unsetenv("SWITCHYARD_CUDA_GRAPHS");
  ASSERT_TRUE(static_cast<bool>(replayed))
      << llvm::toString(replayed.takeError());
  // The same kernels on the same data: equal but for the order of any
  // atomic sums.
  auto close = [](double graph, double plain) {
    return std::abs(graph - plain) <= 1e-6 + 1e-5 * std::abs(plain);
  };
  ASSERT_EQ(replayed->steps.size(), direct->steps.size());
  for (size_t i = 0; i < direct->steps.size(); ++i) {
    EXPECT_PRED2(close, replayed->steps[i].loss, direct->steps[i].loss);
    EXPECT_PRED2(close, replayed->steps[i].gradNorm, direct->steps[i].gradNorm);
  }
  ASSERT_EQ(replayed->evals.size(), direct->evals.size());
  for (size_t i = 0; i < direct->evals.size(); ++i)
    EXPECT_PRED2(close, replayed->evals[i].loss, direct->evals[i].loss);
}

} // namespace

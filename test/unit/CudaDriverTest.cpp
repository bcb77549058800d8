//===- CudaDriverTest.cpp - the CUDA driver layer -------------------------===//
//
// Without a driver the layer must fail cleanly, with a message that says
// so; with a GPU, the pool, copies and the mgpu wrappers are exercised.
// GPU-only tests are SKIPPED, never passed, on machines without one.
//
//===----------------------------------------------------------------------===//

#include "runtime/CudaDriver.h"

#include "gtest/gtest.h"

#include <cstring>
#include <numeric>
#include <vector>

namespace cuda = switchyard::runtime::cuda;

namespace {

TEST(CudaDriverTest, ReportsAMissingDriverOrDevice) {
  llvm::Expected<cuda::Driver &> driver = cuda::Driver::get();
  if (driver) {
    GTEST_SKIP() << "a GPU is present: " << driver->device().name;
  }
  std::string message = llvm::toString(driver.takeError());
  EXPECT_TRUE(message.find("libcuda.so.1") != std::string::npos ||
              message.find("CUDA:") != std::string::npos)
      << message;
  EXPECT_FALSE(cuda::Driver::available());
  // The wrappers generated code calls must not crash either: they defer.
  auto symbols = cuda::mgpuSymbols();
  void *alloc = nullptr;
  for (auto &[name, address] : symbols)
    if (name == "mgpuMemAlloc")
      alloc = address;
  ASSERT_NE(alloc, nullptr);
  auto *memAlloc = reinterpret_cast<void *(*)(uint64_t, void *, bool)>(alloc);
  EXPECT_EQ(memAlloc(1024, nullptr, false), nullptr);
  llvm::Error deferred = cuda::takeDeferredError();
  ASSERT_TRUE(static_cast<bool>(deferred));
  EXPECT_EQ(llvm::toString(std::move(deferred)), message);
}

TEST(CudaDriverTest, PoolReusesBlocksAndCopiesRoundTrip) {
  llvm::Expected<cuda::Driver &> got = cuda::Driver::get();
  if (!got) {
    GTEST_SKIP() << llvm::toString(got.takeError());
  }
  cuda::Driver &driver = *got;
  EXPECT_GE(driver.device().computeCapability, 75);
  llvm::Expected<cuda::DevicePtr> first = driver.allocate(1000);
  ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
  uint64_t held = driver.poolBytes();
  driver.release(*first);
  llvm::Expected<cuda::DevicePtr> second = driver.allocate(900);
  ASSERT_TRUE(static_cast<bool>(second)) << llvm::toString(second.takeError());
  EXPECT_EQ(*first, *second) << "same size class: the block is reused";
  EXPECT_EQ(driver.poolBytes(), held);

  std::vector<float> in(250), out(250, -1.0f);
  std::iota(in.begin(), in.end(), 0.5f);
  llvm::Expected<cuda::Stream> stream = driver.createStream();
  ASSERT_TRUE(static_cast<bool>(stream)) << llvm::toString(stream.takeError());
  ASSERT_FALSE(static_cast<bool>(
      driver.copyToDevice(*second, in.data(), 1000, *stream)));
  ASSERT_FALSE(static_cast<bool>(
      driver.copyToHost(out.data(), *second, 1000, *stream)));
  ASSERT_FALSE(static_cast<bool>(driver.synchronize(*stream)));
  EXPECT_EQ(std::memcmp(in.data(), out.data(), 1000), 0);
  driver.release(*second);
  EXPECT_FALSE(static_cast<bool>(driver.trimPool()));
  EXPECT_EQ(driver.poolBytes(), 0u);
  EXPECT_FALSE(static_cast<bool>(driver.destroyStream(*stream)));
}

TEST(CudaDriverTest, PlannedCallsServeTheGeneratedCodeFromAnArena) {
  llvm::Expected<cuda::Driver &> got = cuda::Driver::get();
  if (!got) {
    GTEST_SKIP() << llvm::toString(got.takeError());
  }
  cuda::Driver &driver = *got;
  void *(*memAlloc)(uint64_t, void *, bool) = nullptr;
  void (*memFree)(void *, void *) = nullptr;
  for (auto &[name, address] : cuda::mgpuSymbols()) {
    if (name == "mgpuMemAlloc")
      memAlloc = reinterpret_cast<void *(*)(uint64_t, void *, bool)>(address);
    if (name == "mgpuMemFree")
      memFree = reinterpret_cast<void (*)(void *, void *)>(address);
  }
  ASSERT_TRUE(memAlloc && memFree);
  // What generated code does in a call: a and c one after the other while
  // b lives; a and c share the arena's memory from the second call on.
  auto call = [&] {
    driver.beginPlannedCall("test;4");
    void *a = memAlloc(4000, nullptr, false);
    void *b = memAlloc(2000, nullptr, false);
    memFree(a, nullptr);
    void *c = memAlloc(4000, nullptr, false);
    memFree(b, nullptr);
    memFree(c, nullptr);
    driver.endPlannedCall();
    return std::vector<void *>{a, b, c};
  };
  call();
  std::vector<void *> second = call(), third = call();
  EXPECT_EQ(second, third);
  EXPECT_EQ(second[0], second[2]);
  const switchyard::runtime::MemoryPlan *plan = driver.memoryPlan("test;4");
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->replayedCalls(), 2u);
  EXPECT_FALSE(static_cast<bool>(cuda::takeDeferredError()));

  // The arena is device memory: a copy round-trips through b's place.
  std::vector<float> in(500), out(500, -1.0f);
  std::iota(in.begin(), in.end(), 0.25f);
  auto b = reinterpret_cast<cuda::DevicePtr>(second[1]);
  ASSERT_FALSE(static_cast<bool>(driver.copyToDevice(b, in.data(), 2000, nullptr)));
  ASSERT_FALSE(static_cast<bool>(driver.copyToHost(out.data(), b, 2000, nullptr)));
  ASSERT_FALSE(static_cast<bool>(driver.synchronize(nullptr)));
  EXPECT_EQ(std::memcmp(in.data(), out.data(), 2000), 0);
}

TEST(CudaDriverTest, BadModulesAreReportedWithTheDriverError) {
  llvm::Expected<cuda::Driver &> got = cuda::Driver::get();
  if (!got) {
    GTEST_SKIP() << llvm::toString(got.takeError());
  }
  llvm::Expected<cuda::Module> module =
      got->loadModule("//\n.version 8.0\n.target sm_75\nthis is not ptx\n");
  ASSERT_FALSE(static_cast<bool>(module));
  std::string message = llvm::toString(module.takeError());
  EXPECT_NE(message.find("cuModuleLoadDataEx failed with CUDA_ERROR_"),
            std::string::npos)
      << message;
}

/// A kernel that writes and reads back the last word of its dynamic shared
/// memory (`bytes` of it) and stores it to out[0].
constexpr const char *kLastSharedWordPtx = R"(
.version 7.0
.target sm_75
.address_size 64

.extern .shared .align 16 .b8 dynamic_shared[];

.visible .entry write_last_shared_word(
	.param .u64 out,
	.param .u32 bytes
)
{
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [out];
	ld.param.u32 	%r1, [bytes];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r2, dynamic_shared;
	add.s32 	%r2, %r2, %r1;
	add.s32 	%r2, %r2, -4;
	mov.u32 	%r3, 42;
	st.shared.u32 	[%r2], %r3;
	bar.sync 	0;
	ld.shared.u32 	%r3, [%r2];
	st.global.u32 	[%rd2], %r3;
	ret;
}
)";

/// Above 48 KiB of dynamic shared memory a kernel must opt in; launch does
/// (the attention kernels with relative keys take up to 94 KiB). 64 KiB is
/// the most sm_75 allows.
TEST(CudaDriverTest, LaunchesWithMoreThan48KiBOfSharedMemory) {
  llvm::Expected<cuda::Driver &> got = cuda::Driver::get();
  if (!got) {
    GTEST_SKIP() << llvm::toString(got.takeError());
  }
  cuda::Driver &driver = *got;
  llvm::Expected<cuda::Module> module = driver.loadModule(kLastSharedWordPtx);
  ASSERT_TRUE(static_cast<bool>(module)) << llvm::toString(module.takeError());
  llvm::Expected<cuda::Function> function =
      driver.getFunction(*module, "write_last_shared_word");
  ASSERT_TRUE(static_cast<bool>(function))
      << llvm::toString(function.takeError());
  llvm::Expected<cuda::DevicePtr> out = driver.allocate(sizeof(uint32_t));
  ASSERT_TRUE(static_cast<bool>(out)) << llvm::toString(out.takeError());
  llvm::Expected<cuda::Stream> stream = driver.createStream();
  ASSERT_TRUE(static_cast<bool>(stream)) << llvm::toString(stream.takeError());
  uint32_t bytes = 64 * 1024;
  cuda::DevicePtr outPtr = *out;
  void *params[] = {&outPtr, &bytes};
  const uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
  llvm::Error launched = driver.launch(*function, grid, block, bytes, *stream,
                                       params, "write_last_shared_word");
  ASSERT_FALSE(static_cast<bool>(launched))
      << llvm::toString(std::move(launched));
  uint32_t result = 0;
  ASSERT_FALSE(static_cast<bool>(
      driver.copyToHost(&result, *out, sizeof(result), *stream)));
  ASSERT_FALSE(static_cast<bool>(driver.synchronize(*stream)));
  EXPECT_EQ(result, 42u);

  // Profiled, the same launch twice is timed under the kernel's name.
  cuda::resetKernelProfile();
  cuda::setKernelProfiling(true);
  for (int i = 0; i < 2; ++i) {
    llvm::Error again = driver.launch(*function, grid, block, bytes, *stream,
                                      params, "write_last_shared_word");
    ASSERT_FALSE(static_cast<bool>(again)) << llvm::toString(std::move(again));
  }
  cuda::setKernelProfiling(false);
  std::vector<cuda::KernelTime> times = cuda::kernelProfile();
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times[0].name, "write_last_shared_word");
  EXPECT_EQ(times[0].launches, 2u);
  EXPECT_GT(times[0].milliseconds, 0.0);
  EXPECT_EQ(times[0].block[0], 32u);
  EXPECT_EQ(times[0].sharedBytes, bytes);
  cuda::resetKernelProfile();

  driver.release(*out);
  EXPECT_FALSE(static_cast<bool>(driver.destroyStream(*stream)));
  EXPECT_FALSE(static_cast<bool>(driver.unloadModule(*module)));
}

// The profile's table (no GPU needed): longest first as given, shares of
// the total, means per launch, and one line for the kernels not listed.
TEST(CudaDriverTest, KernelProfileTable) {
  std::vector<cuda::KernelTime> times(3);
  times[0].name = "main_kernel_7";
  times[0].launches = 4;
  times[0].milliseconds = 6.0;
  times[0].grid[0] = 128;
  times[0].grid[1] = times[0].grid[2] = 1;
  times[0].block[0] = 128;
  times[0].block[1] = times[0].block[2] = 1;
  times[0].sharedBytes = 18432;
  times[1].name = "main_kernel_2";
  times[1].launches = 1;
  times[1].milliseconds = 3.0;
  times[2].name = "main_kernel_3";
  times[2].launches = 5;
  times[2].milliseconds = 1.0;
  std::string text;
  llvm::raw_string_ostream os(text);
  cuda::printKernelProfile(os, times, 2);
  EXPECT_NE(text.find("3 kernels, 10 launches, 10.000 ms"), std::string::npos)
      << text;
  EXPECT_NE(text.find("       6.000  60.0%         4      1500.0  128x1x1 "
                      "         128x1x1        18432  main_kernel_7"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("3.000  30.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("1.000  10.0%         5  (the other 1 kernels)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("main_kernel_3"), std::string::npos) << text;
}

} // namespace

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

} // namespace

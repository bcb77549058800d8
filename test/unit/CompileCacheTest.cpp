//===- CompileCacheTest.cpp - the compile cache ---------------------------===//
//
// runtime/CompileCache.h: entries round-trip, misses for what cannot be
// used, concurrent writers of one key; and CpuProgram through the cache: a
// hit loads a program that computes what the compiled one computes.
//
//===----------------------------------------------------------------------===//

#include "runtime/CompileCache.h"
#include "runtime/Engine/CpuProgram.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <atomic>
#include <fstream>
#include <functional>
#include <thread>

namespace rt = switchyard::runtime;

namespace {

/// A fresh directory, removed at the end of the test.
struct TempDir {
  llvm::SmallString<128> path;
  TempDir() {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("sy-cache-test", path));
  }
  ~TempDir() { (void)llvm::sys::fs::remove_directories(path); }
};

rt::CacheEntry sampleEntry(char fill) {
  rt::CacheEntry entry;
  rt::FunctionSpec function;
  function.name = "f";
  rt::TensorSpec tokens;
  tokens.type = rt::ElementType::i32;
  tokens.shape = {-1, 16};
  tokens.vocab = 256;
  function.arguments.push_back(tokens);
  rt::TensorSpec weight;
  weight.shape = {4, 8};
  weight.param = "w";
  weight.role = rt::ArgRole::param;
  function.arguments.push_back(weight);
  function.results.push_back(rt::TensorSpec{});
  entry.functions.push_back(function);
  rt::ParamSpec param;
  param.name = "w";
  param.shape = {4, 8};
  param.init = rt::InitKind::normal;
  param.std = 0.02;
  param.alias = "layers.0.w";
  entry.params.params.push_back(param);
  entry.backend = "cpu";
  entry.objects = {std::string(100000, fill), std::string(3000, fill), ""};
  entry.constructors = {"m_kernels_load", "f_kernels_load"};
  entry.destructors = {"f_kernels_unload"};
  return entry;
}

TEST(CompileCacheTest, EntriesRoundTrip) {
  TempDir dir;
  std::string key = rt::cacheKey("a model and its options");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_NE(key, rt::cacheKey("a model and other options"));
  EXPECT_FALSE(rt::readCacheEntry(dir.path, key)) << "a miss before a write";
  ASSERT_FALSE(static_cast<bool>(
      rt::writeCacheEntry(dir.path, key, sampleEntry('x'))));
  std::optional<rt::CacheEntry> read = rt::readCacheEntry(dir.path, key);
  ASSERT_TRUE(read);
  rt::CacheEntry expected = sampleEntry('x');
  EXPECT_EQ(read->objects, expected.objects);
  EXPECT_EQ(read->backend, "cpu");
  ASSERT_EQ(read->functions.size(), 1u);
  const rt::FunctionSpec &function = read->functions[0];
  EXPECT_EQ(function.name, "f");
  ASSERT_EQ(function.arguments.size(), 2u);
  EXPECT_EQ(function.arguments[0].type, rt::ElementType::i32);
  EXPECT_EQ(function.arguments[0].shape, (std::vector<int64_t>{-1, 16}));
  EXPECT_EQ(function.arguments[0].vocab, std::optional<int64_t>(256));
  EXPECT_EQ(function.arguments[1].param, "w");
  EXPECT_EQ(function.arguments[1].role, rt::ArgRole::param);
  EXPECT_FALSE(function.arguments[1].vocab);
  ASSERT_EQ(read->params.params.size(), 1u);
  const rt::ParamSpec &param = read->params.params[0];
  EXPECT_EQ(param.name, "w");
  EXPECT_EQ(param.init, rt::InitKind::normal);
  EXPECT_EQ(param.std, 0.02);
  EXPECT_EQ(param.alias, "layers.0.w");
  EXPECT_EQ(read->constructors, expected.constructors);
  EXPECT_EQ(read->destructors, expected.destructors);
}

/// Rewrites the entry's file with `edit` applied to its bytes.
void corrupt(llvm::StringRef path,
             const std::function<void(std::string &)> &edit) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  ASSERT_TRUE(static_cast<bool>(buffer));
  std::string bytes = (*buffer)->getBuffer().str();
  edit(bytes);
  std::ofstream(path.str(), std::ios::binary | std::ios::trunc) << bytes;
}

TEST(CompileCacheTest, DamagedEntriesAreMisses) {
  TempDir dir;
  std::string key = rt::cacheKey("model");
  std::string path = rt::cacheEntryPath(dir.path, key);
  const std::vector<std::function<void(std::string &)>> damages = {
      [](std::string &bytes) { bytes.resize(bytes.size() / 2); },
      [](std::string &bytes) { bytes[bytes.size() - 10] ^= 1; },
      [](std::string &bytes) { bytes[bytes.find('\n') + 5] ^= 1; },
      [](std::string &bytes) { bytes.replace(0, 10, "not-a-cach"); },
      [](std::string &bytes) { bytes.clear(); },
      [](std::string &bytes) { bytes += "trailing"; },
  };
  for (size_t i = 0; i < damages.size(); ++i) {
    ASSERT_FALSE(static_cast<bool>(
        rt::writeCacheEntry(dir.path, key, sampleEntry('y'))));
    corrupt(path, damages[i]);
    EXPECT_FALSE(rt::readCacheEntry(dir.path, key)) << "damage " << i;
    // The next write replaces it.
    ASSERT_FALSE(static_cast<bool>(
        rt::writeCacheEntry(dir.path, key, sampleEntry('y'))));
    EXPECT_TRUE(rt::readCacheEntry(dir.path, key)) << "damage " << i;
  }
}

TEST(CompileCacheTest, ConcurrentWritersLeaveOneWholeEntry) {
  TempDir dir;
  std::string key = rt::cacheKey("model");
  std::atomic<bool> torn{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        EXPECT_FALSE(static_cast<bool>(
            rt::writeCacheEntry(dir.path, key, sampleEntry('a' + t))));
        // A reader sees a whole entry of one writer, never a mix.
        if (std::optional<rt::CacheEntry> read =
                rt::readCacheEntry(dir.path, key))
          if (read->objects.front().find_first_not_of(
                  read->objects.front()[0]) != std::string::npos)
            torn = true;
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_FALSE(torn);
  std::optional<rt::CacheEntry> last = rt::readCacheEntry(dir.path, key);
  ASSERT_TRUE(last);
  // No temporary is left behind.
  std::error_code error;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(dir.path, error), end;
       it != end && !error; it.increment(error))
    ++files;
  EXPECT_EQ(files, 1);
}

constexpr const char *kScale = R"mlir(
func.func @scale(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %y = arith.addf %x, %x : tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
)mlir";

TEST(CompileCacheTest, CpuProgramsLoadFromTheCache) {
  TempDir dir;
  rt::CompileOptions options;
  options.cacheDirectory = std::string(dir.path);
  auto cold = rt::CpuProgram::compile(kScale, "scale.mlir", options);
  ASSERT_TRUE(static_cast<bool>(cold)) << llvm::toString(cold.takeError());
  EXPECT_TRUE((*cold)->cacheReport().starts_with("stored "))
      << (*cold)->cacheReport().str();
  auto hit = rt::CpuProgram::compile(kScale, "scale.mlir", options);
  ASSERT_TRUE(static_cast<bool>(hit)) << llvm::toString(hit.takeError());
  EXPECT_TRUE((*hit)->cacheReport().starts_with("hit "))
      << (*hit)->cacheReport().str();
  ASSERT_EQ((*hit)->functions().size(), 1u);
  EXPECT_EQ((*hit)->functions()[0].name, "scale");

  std::vector<float> values;
  for (int i = 0; i < 8; ++i)
    values.push_back(float(i) - 2.5f);
  rt::HostTensor x =
      rt::HostTensor::fromValues("x", rt::ElementType::f32, {2, 4}, values);
  auto expected = (*cold)->call("scale", {&x});
  auto actual = (*hit)->call("scale", {&x});
  ASSERT_TRUE(static_cast<bool>(expected));
  ASSERT_TRUE(static_cast<bool>(actual));
  EXPECT_EQ((*actual)[0].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ((*actual)[0].bytes, (*expected)[0].bytes);

  // Other options: another entry.
  rt::CompileOptions other = options;
  other.optLevel = 1;
  auto miss = rt::CpuProgram::compile(kScale, "scale.mlir", other);
  ASSERT_TRUE(static_cast<bool>(miss));
  EXPECT_TRUE((*miss)->cacheReport().starts_with("stored "));
  // Without a directory: no cache.
  auto uncached = rt::CpuProgram::compile(kScale, "scale.mlir", {});
  ASSERT_TRUE(static_cast<bool>(uncached));
  EXPECT_TRUE((*uncached)->cacheReport().empty());
}

} // namespace

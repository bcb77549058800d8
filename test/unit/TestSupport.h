//===- TestSupport.h - helpers shared by the unit tests ---------*- C++ -*-===//
//
// Calling compiled functions from GoogleTest (a failed call is a test
// failure with the runtime's message), seeded random inputs, LLVM IR from
// text.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_TEST_UNIT_TESTSUPPORT_H
#define SWITCHYARD_TEST_UNIT_TESTSUPPORT_H

#include "runtime/Engine/CpuProgram.h"

#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/SourceMgr.h"

#include "gtest/gtest.h"

#include <memory>
#include <random>

namespace switchyard::test {

/// `source` parsed as LLVM IR; null (and a test failure) if it does not
/// parse.
inline std::unique_ptr<llvm::Module> parseLLVM(const char *source,
                                               llvm::LLVMContext &context) {
  llvm::SMDiagnostic error;
  std::unique_ptr<llvm::Module> module =
      llvm::parseAssemblyString(source, error, context);
  if (!module)
    ADD_FAILURE() << error.getMessage().str();
  return module;
}

/// Calls `name` with `arguments`; on an error, fails the test and returns
/// no results.
inline std::vector<runtime::HostTensor>
callOrFail(runtime::CpuProgram &program, llvm::StringRef name,
           const std::vector<runtime::HostTensor> &arguments) {
  std::vector<const runtime::HostTensor *> pointers;
  for (const runtime::HostTensor &argument : arguments)
    pointers.push_back(&argument);
  llvm::Expected<std::vector<runtime::HostTensor>> results =
      program.call(name, pointers);
  if (!results) {
    ADD_FAILURE() << llvm::toString(results.takeError());
    return {};
  }
  return std::move(*results);
}

/// An f32 tensor of `shape`, uniform in [-scale, scale], from `seed`.
inline runtime::HostTensor randomTensor(const std::vector<int64_t> &shape,
                                        unsigned seed, float scale) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  std::vector<float> values(static_cast<size_t>(count));
  for (float &v : values)
    v = uniform(generator);
  return runtime::HostTensor::fromValues<float>(
      "", runtime::ElementType::f32, shape, values);
}

/// An i32 tensor of `shape`, uniform in [0, bound), from `seed`.
inline runtime::HostTensor indices(const std::vector<int64_t> &shape,
                                   int64_t bound, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int32_t> uniform(0, int32_t(bound - 1));
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  std::vector<int32_t> values(static_cast<size_t>(count));
  for (int32_t &v : values)
    v = uniform(generator);
  return runtime::HostTensor::fromValues<int32_t>(
      "", runtime::ElementType::i32, shape, values);
}

} // namespace switchyard::test

#endif // SWITCHYARD_TEST_UNIT_TESTSUPPORT_H

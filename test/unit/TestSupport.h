//===- TestSupport.h - helpers shared by the unit tests ---------*- C++ -*-===//
//
// Calling compiled functions from GoogleTest: a failed call is a test
// failure with the runtime's message.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_TEST_UNIT_TESTSUPPORT_H
#define SWITCHYARD_TEST_UNIT_TESTSUPPORT_H

#include "runtime/CpuProgram.h"

#include "gtest/gtest.h"

namespace switchyard::test {

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

} // namespace switchyard::test

#endif // SWITCHYARD_TEST_UNIT_TESTSUPPORT_H

//===- GatherTest.cpp - copying result views into dense tensors -----------===//
//
// runtime::detail::gather copies a result's view (sizes and strides, in
// elements) into a dense row-major HostTensor: one copy for a row-major
// view, one per row for unit-stride rows, element by element otherwise.
// Each path is compared with the view read element by element here.
//
//===----------------------------------------------------------------------===//

#include "runtime/Engine/ProgramSupport.h"

#include "gtest/gtest.h"

#include <cstring>
#include <numeric>
#include <vector>

using namespace switchyard::runtime;

namespace {

/// The floats of `view` over `base`, read one index at a time.
std::vector<float> readView(const detail::ResultDescriptor &view,
                            const float *base) {
  std::vector<float> values;
  std::vector<int64_t> index(view.sizes.size(), 0);
  for (int64_t n = 0, e = view.numElements(); n < e; ++n) {
    int64_t at = 0;
    for (size_t d = 0; d < index.size(); ++d)
      at += index[d] * view.strides[d];
    values.push_back(base[at]);
    for (int64_t d = int64_t(index.size()) - 1; d >= 0; --d) {
      if (++index[d] < view.sizes[d])
        break;
      index[d] = 0;
    }
  }
  return values;
}

std::vector<float> gathered(const detail::ResultDescriptor &view,
                            const float *base) {
  HostTensor tensor = detail::gather(
      view, ElementType::f32, reinterpret_cast<const uint8_t *>(base));
  EXPECT_EQ(tensor.shape, view.sizes);
  std::vector<float> values(tensor.bytes.size() / sizeof(float));
  std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

detail::ResultDescriptor view(std::vector<int64_t> sizes,
                              std::vector<int64_t> strides) {
  detail::ResultDescriptor result;
  result.sizes = std::move(sizes);
  result.strides = std::move(strides);
  return result;
}

TEST(GatherTest, CopiesEveryKindOfView) {
  std::vector<float> memory(4 * 5 * 6);
  std::iota(memory.begin(), memory.end(), 0.0f);
  const float *base = memory.data();
  // Row-major, with a unit dimension of any stride.
  for (const detail::ResultDescriptor &v :
       {view({4, 5, 6}, {30, 6, 1}), view({4, 1, 6}, {30, 7, 1}),
        // Unit-stride rows, padded: a [4, 3, 6] slice of [4, 5, 6].
        view({4, 3, 6}, {30, 6, 1}),
        // Strided rows: a transpose, and every other column.
        view({6, 4}, {1, 30}), view({4, 3}, {30, 2}),
        // A scalar and an empty view.
        view({}, {}), view({0, 6}, {6, 1})})
    EXPECT_EQ(gathered(v, base), readView(v, base));
}

} // namespace

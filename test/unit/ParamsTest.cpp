//===- ParamsTest.cpp - tests of the runtime's parameter initialisers -----===//
//
// Checks the reproducible initialisers by their defining properties:
// determinism, independence of streams, sample statistics (with tolerances
// derived from the sample size) and exact row norms for row_normal.
//
//===----------------------------------------------------------------------===//

#include "runtime/Params.h"

#include "gtest/gtest.h"

#include <cmath>
#include <vector>

using namespace switchyard::runtime;

namespace {

std::vector<float> init(const ParamSpec &spec, uint64_t seed) {
  std::vector<float> values(static_cast<size_t>(spec.numElements()));
  initialize(spec, seed, values);
  return values;
}

TEST(ParamsTest, CountsElements) {
  ParamTable table;
  table.params.push_back({"a", {10, 412, 76}, DType::f32, InitKind::zeros});
  table.params.push_back({"b", {412}, DType::bf16, InitKind::ones});
  EXPECT_EQ(table.params[0].numElements(), 313120);
  EXPECT_EQ(table.totalElements(), 313532);
  ASSERT_NE(table.find("b"), nullptr);
  EXPECT_EQ(table.find("b")->dtype, DType::bf16);
  EXPECT_EQ(table.find("c"), nullptr);
}

TEST(ParamsTest, NamesRoundTrip) {
  for (DType type : {DType::f32, DType::f16, DType::bf16})
    EXPECT_EQ(parseDType(toString(type)), type);
  for (InitKind kind : {InitKind::zeros, InitKind::ones, InitKind::normal,
                        InitKind::row_normal})
    EXPECT_EQ(parseInitKind(toString(kind)), kind);
  EXPECT_EQ(parseDType("f64"), std::nullopt);
  EXPECT_EQ(parseInitKind("uniform"), std::nullopt);
}

TEST(ParamsTest, ConstantFills) {
  EXPECT_EQ(init({"z", {3, 2}, DType::f32, InitKind::zeros}, 1),
            std::vector<float>(6, 0.0f));
  EXPECT_EQ(init({"o", {5}, DType::f32, InitKind::ones}, 1),
            std::vector<float>(5, 1.0f));
}

TEST(ParamsTest, NormalIsReproducibleAndPerName) {
  ParamSpec a{"layers.0.att.q", {64, 32}, DType::f32, InitKind::normal, 0.1};
  ParamSpec b = a;
  b.name = "layers.0.att.k";
  EXPECT_EQ(init(a, 7), init(a, 7));
  EXPECT_NE(init(a, 7), init(a, 8));
  EXPECT_NE(init(a, 7), init(b, 7));
}

TEST(ParamsTest, NormalHasTheRequestedMoments) {
  // 2^18 samples: the standard error of the mean is std/512 and that of the
  // deviation about std/724; the tolerances are about 5 standard errors.
  const double std = 0.05;
  ParamSpec spec{"w", {512, 512}, DType::f32, InitKind::normal, std};
  std::vector<float> values = init(spec, 42);
  double sum = 0, squares = 0, fourth = 0;
  for (float v : values) {
    sum += v;
    squares += double(v) * v;
    fourth += std::pow(double(v) / std, 4);
  }
  double n = double(values.size());
  double mean = sum / n;
  double deviation = std::sqrt(squares / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 5 * std / 512);
  EXPECT_NEAR(deviation, std, 5 * std / 724);
  // The fourth standardised moment of a normal distribution is 3.
  EXPECT_NEAR(fourth / n, 3.0, 0.1);
}

TEST(ParamsTest, RowNormalRowsHaveTheTargetNorm) {
  // SwitchHead router: rows of unit direction, rescaled to norm std·√cols.
  const double std = 0.0625;
  ParamSpec spec{"sel_v", {10, 412}, DType::f32, InitKind::row_normal, std};
  std::vector<float> values = init(spec, 3);
  for (int row = 0; row < 10; ++row) {
    double norm = 0;
    for (int c = 0; c < 412; ++c)
      norm += double(values[row * 412 + c]) * values[row * 412 + c];
    EXPECT_NEAR(std::sqrt(norm), std * std::sqrt(412.0), 1e-5)
        << "row " << row;
  }
}

} // namespace

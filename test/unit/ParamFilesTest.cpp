//===- ParamFilesTest.cpp - parameters bound from safetensors files -------===//
//
// The binding rules of runtime/ParamFiles.h: Switchyard's names and the
// official ones, rename rules, the errors that name what is wrong, f16 and
// bf16 files read into f32 parameters, initialisation of what no file holds,
// and the conversion of legacy Transformer-XL positional weights, checked
// against both encodings' definitions.
//
//===----------------------------------------------------------------------===//

#include "runtime/ParamFiles.h"
#include "lib/Reference/Reference.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace switchyard::runtime;
namespace ref = switchyard::reference;

namespace {

class ParamFilesTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("param-files", dir));
    directory = std::string(dir);
    // An XL attention layer's query and positional weights [H·F, D] with
    // official names, and a norm without one.
    table.params = {
        {"att.norm.weight", {4}, DType::f32, InitKind::ones, 0.0, ""},
        {"att.q", {2, 4}, DType::f32, InitKind::normal, 0.5, "att.q.weight"},
        {"att.pos", {2, 4}, DType::f32, InitKind::normal, 0.5,
         "att.pos_to_pk"}};
  }
  void TearDown() override { llvm::sys::fs::remove_directories(directory); }

  static HostTensor f32(std::string name, std::vector<int64_t> shape,
                        std::vector<float> values) {
    return HostTensor::fromValues<float>(std::move(name), ElementType::f32,
                                         std::move(shape), values);
  }

  std::string write(const char *name, const std::vector<HostTensor> &tensors,
                    const TensorMetadata &metadata = {}) {
    std::string path = directory + "/" + name;
    EXPECT_FALSE(static_cast<bool>(writeSafetensors(path, tensors, metadata)));
    return path;
  }

  /// readParamFiles' error message, or "" when it succeeds.
  std::string errorOf(const std::vector<std::string> &paths,
                      const ParamFileOptions &options = {}) {
    llvm::Expected<std::vector<HostTensor>> read =
        readParamFiles(table, paths, options);
    return read ? std::string() : llvm::toString(read.takeError());
  }

  std::string directory;
  ParamTable table;
  const std::vector<float> norm{1, 2, 3, 4}, q{1, 2, 3, 4, 5, 6, 7, 8},
      pos{-1, -2, -3, -4, -5, -6, -7, -8};
};

TEST_F(ParamFilesTest, BindsByNameOrOfficialName) {
  // Switchyard's name for the norm, the official ones for q and pos, in
  // another order than the table's; the result follows the table.
  std::string path = write("mixed.safetensors",
                           {f32("att.pos_to_pk", {2, 4}, pos),
                            f32("att.norm.weight", {4}, norm),
                            f32("att.q.weight", {2, 4}, q)});
  std::vector<std::string> notes;
  ParamFileOptions options;
  options.note = [&](const std::string &line) { notes.push_back(line); };
  llvm::Expected<std::vector<HostTensor>> read =
      readParamFiles(table, {path}, options);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  ASSERT_EQ(read->size(), 3u);
  EXPECT_EQ((*read)[0], f32("att.norm.weight", {4}, norm));
  EXPECT_EQ((*read)[1], f32("att.q", {2, 4}, q));
  EXPECT_EQ((*read)[2], f32("att.pos", {2, 4}, pos));
  EXPECT_TRUE(notes.empty());
}

TEST_F(ParamFilesTest, RenameRulesRewritePrefixes) {
  // A file of one official module, without a prefix, and one from another
  // tree; the first matching rule applies.
  std::string module = write("module.safetensors",
                             {f32("q.weight", {2, 4}, q),
                              f32("pos_to_pk", {2, 4}, pos)});
  std::string other = write("other.safetensors",
                            {f32("model.att.norm.weight", {4}, norm)});
  ParamFileOptions options;
  for (const char *rule : {"model.=", "=att."}) {
    llvm::Expected<Rename> parsed = parseRename(rule);
    ASSERT_TRUE(static_cast<bool>(parsed));
    options.renames.push_back(*parsed);
  }
  llvm::Expected<std::vector<HostTensor>> read =
      readParamFiles(table, {module, other}, options);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ((*read)[0].values<float>()[3], 4.0f);
  EXPECT_EQ((*read)[2].values<float>()[0], -1.0f);

  llvm::Expected<Rename> bad = parseRename("no-equals-sign");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("expected FROM=TO"),
            std::string::npos);
}

TEST_F(ParamFilesTest, ErrorsNameTheTensorAndTheParameter) {
  std::string good = write("good.safetensors",
                           {f32("att.norm.weight", {4}, norm),
                            f32("att.q", {2, 4}, q),
                            f32("att.pos", {2, 4}, pos)});
  // A shape that differs.
  std::string wide = write("wide.safetensors",
                           {f32("att.pos_to_pk", {1, 8}, pos)});
  EXPECT_NE(errorOf({wide}).find(
                "tensor 'att.pos_to_pk' has shape 1x8, but parameter "
                "'att.pos' (official name 'att.pos_to_pk') is declared "
                "2x4 f32"),
            std::string::npos);
  // One parameter from two files, under either name.
  std::string again =
      write("again.safetensors", {f32("att.q.weight", {2, 4}, q)});
  std::string twice = errorOf({good, again});
  EXPECT_NE(twice.find("again.safetensors: tensor 'att.q.weight' gives "
                       "parameter 'att.q' (official name 'att.q.weight'), "
                       "which "),
            std::string::npos)
      << twice;
  EXPECT_NE(twice.find("good.safetensors: tensor 'att.q' already gave"),
            std::string::npos)
      << twice;
  // Missing parameters, each by both names, with a hint.
  std::string partial =
      write("partial.safetensors", {f32("att.q", {2, 4}, q)});
  std::string missing = errorOf({partial});
  EXPECT_NE(missing.find("2 parameters of the model are missing:\n"
                         "  'att.norm.weight' 4 f32\n"
                         "  'att.pos' (official name 'att.pos_to_pk') 2x4 "
                         "f32\n(--init-missing"),
            std::string::npos)
      << missing;
  // Integers are no parameter values.
  std::string ints = write(
      "ints.safetensors",
      {HostTensor::fromValues<int32_t>("att.norm.weight", ElementType::i32,
                                       {4}, std::vector<int32_t>{1, 2, 3, 4})});
  EXPECT_NE(errorOf({ints}).find("holds i32 elements, but parameter "
                                 "'att.norm.weight' is declared 4 f32"),
            std::string::npos);
}

TEST_F(ParamFilesTest, UnknownTensorsAreNotedAndSkipped) {
  std::string path = write("extra.safetensors",
                           {f32("att.norm.weight", {4}, norm),
                            f32("att.q", {2, 4}, q),
                            f32("att.pos", {2, 4}, pos),
                            f32("decoder.bias", {4}, norm)});
  std::vector<std::string> notes;
  ParamFileOptions options;
  options.note = [&](const std::string &line) { notes.push_back(line); };
  ASSERT_TRUE(static_cast<bool>(readParamFiles(table, {path}, options)));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("1 tensor binds to no parameter of the model and "
                          "is ignored:\n  "),
            std::string::npos);
  EXPECT_NE(notes[0].find("tensor 'decoder.bias'"), std::string::npos);
}

TEST_F(ParamFilesTest, HalfPrecisionFilesWidenToF32) {
  // bf16 1.5 = 0x3fc0, -2 = 0xc000; f16 0.25 = 0x3400, 65504 = 0x7bff.
  std::string path = write(
      "half.safetensors",
      {HostTensor::fromValues<uint16_t>("att.norm.weight", ElementType::bf16,
                                        {4},
                                        std::vector<uint16_t>{0x3fc0, 0xc000,
                                                              0x3400, 0x7bff}),
       HostTensor::fromValues<uint16_t>(
           "att.q", ElementType::f16, {2, 4},
           std::vector<uint16_t>{0x3400, 0x7bff, 0, 0, 0, 0, 0, 0x8000}),
       f32("att.pos", {2, 4}, pos)});
  llvm::Expected<std::vector<HostTensor>> read =
      readParamFiles(table, {path}, {});
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ((*read)[0].type, ElementType::f32);
  EXPECT_EQ((*read)[0].values<float>()[0], 1.5f);
  EXPECT_EQ((*read)[0].values<float>()[1], -2.0f);
  EXPECT_EQ((*read)[1].values<float>()[0], 0.25f);
  EXPECT_EQ((*read)[1].values<float>()[1], 65504.0f);
  EXPECT_TRUE(std::signbit((*read)[1].values<float>()[7]));
}

TEST_F(ParamFilesTest, InitMissingUsesTheDeclaredInitialisers) {
  std::string path = write("q.safetensors", {f32("att.q", {2, 4}, q)});
  std::vector<std::string> notes;
  ParamFileOptions options;
  options.initMissing = true;
  options.seed = 9;
  options.note = [&](const std::string &line) { notes.push_back(line); };
  llvm::Expected<std::vector<HostTensor>> read =
      readParamFiles(table, {path}, options);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  std::vector<float> expected(8);
  initialize(table.params[2], 9, expected);
  EXPECT_EQ((*read)[2], f32("att.pos", {2, 4}, expected));
  EXPECT_EQ((*read)[0], f32("att.norm.weight", {4}, {1, 1, 1, 1}));
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[1], "'att.pos' is in no file: initialised normal");
  // No file at all: every parameter from its initialiser.
  llvm::Expected<std::vector<HostTensor>> fresh =
      readParamFiles(table, {}, options);
  ASSERT_TRUE(static_cast<bool>(fresh));
  EXPECT_EQ((*fresh)[2], (*read)[2]);
}

TEST_F(ParamFilesTest, CheckpointStateIsNotAParameter) {
  std::string path = write(
      "checkpoint.safetensors",
      {f32("att.norm.weight", {4}, norm), f32("att.q", {2, 4}, q),
       f32("att.pos", {2, 4}, pos), f32("optimizer.m.att.q", {2, 4}, q),
       f32("state.memory.0", {4}, norm)},
      {{"format", kCheckpointFormat}, {"model", "m"}});
  std::vector<std::string> notes;
  ParamFileOptions options;
  options.note = [&](const std::string &line) { notes.push_back(line); };
  ASSERT_TRUE(static_cast<bool>(readParamFiles(table, {path}, options)));
  EXPECT_TRUE(notes.empty());
}

/// The legacy XL table: row δ = [sin(δω_0) … sin(δω_{D/2−1}), cos(δω_0) …].
std::vector<double> legacySinusoid(int64_t delta, int64_t width) {
  std::vector<double> pe(static_cast<size_t>(width));
  for (int64_t i = 0; i < width / 2; ++i) {
    double omega = std::pow(10000.0, -2.0 * double(i) / double(width));
    pe[size_t(i)] = std::sin(double(delta) * omega);
    pe[size_t(width / 2 + i)] = std::cos(double(delta) * omega);
  }
  return pe;
}

TEST_F(ParamFilesTest, LegacyXlConversionKeepsTheRelativeKeys) {
  // The relative key of every distance δ, pe·Wᵀ, is the same with the
  // legacy table and legacy weights as with the official table (relative
  // position −δ, reference::sinusoid) and the converted weights.
  const int64_t rows = 6, width = 10, distances = 40;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> legacy(size_t(rows * width));
  for (float &w : legacy)
    w = normal(rng);
  HostTensor converted = f32("l.pos", {rows, width}, legacy);
  convertLegacyXlPosition(converted, /*secondMoment=*/false);
  std::span<const float> w = converted.values<float>();
  for (int64_t delta = 0; delta < distances; ++delta) {
    std::vector<double> old = legacySinusoid(delta, width);
    ref::Tensor official = ref::sinusoid(-delta, width);
    for (int64_t r = 0; r < rows; ++r) {
      double before = 0, after = 0;
      for (int64_t d = 0; d < width; ++d) {
        before += old[size_t(d)] * legacy[size_t(r * width + d)];
        after += double(official.data[size_t(d)]) * w[size_t(r * width + d)];
      }
      EXPECT_NEAR(after, before, 1e-5) << "δ " << delta << ", row " << r;
    }
  }
  // Second moments move with their weights and keep their sign.
  HostTensor moments = f32("l.pos", {1, 4}, {1, 2, 3, 4});
  convertLegacyXlPosition(moments, /*secondMoment=*/true);
  EXPECT_EQ(moments, f32("l.pos", {1, 4}, {1, 3, 2, 4}));
  HostTensor weights = f32("l.pos", {1, 4}, {1, 2, 3, 4});
  convertLegacyXlPosition(weights, /*secondMoment=*/false);
  EXPECT_EQ(weights, f32("l.pos", {1, 4}, {-1, 3, -2, 4}));
}

TEST_F(ParamFilesTest, LegacyFilesAreConvertedWhenRead) {
  EXPECT_TRUE(isXlPositionWeight(table, table.params[2]));
  EXPECT_FALSE(isXlPositionWeight(table, table.params[1]));
  std::vector<HostTensor> tensors{f32("att.norm.weight", {4}, norm),
                                  f32("att.q", {2, 4}, q),
                                  f32("att.pos", {2, 4}, pos)};
  // Written by `run --save-params` before the official encoding: the
  // positional weight converts, the others stay.
  std::string legacy = write("legacy.safetensors", tensors,
                             {{"format", "switchyard"}, {"model", "m"}});
  std::vector<std::string> notes;
  ParamFileOptions options;
  options.note = [&](const std::string &line) { notes.push_back(line); };
  llvm::Expected<std::vector<HostTensor>> read =
      readParamFiles(table, {legacy}, options);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ((*read)[1], tensors[1]);
  EXPECT_EQ((*read)[2], f32("att.pos", {2, 4}, {1, -3, 2, -4, 5, -7, 6, -8}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("'att.pos' converted from the XL encoding"),
            std::string::npos);
  // Today's files and foreign ones are read as they are.
  for (const TensorMetadata &metadata :
       {TensorMetadata{{"format", kParamsFormat}}, TensorMetadata{}}) {
    std::string path = write("current.safetensors", tensors, metadata);
    llvm::Expected<std::vector<HostTensor>> same =
        readParamFiles(table, {path}, {});
    ASSERT_TRUE(static_cast<bool>(same));
    EXPECT_EQ((*same)[2], tensors[2]);
  }
}

} // namespace

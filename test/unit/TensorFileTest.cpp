//===- TensorFileTest.cpp - tests of the npy and safetensors file I/O -----===//
//
// Round trips every element type and ranks 0 to 4 through both formats,
// reads byte-exact fixtures of what numpy.save and the safetensors library
// write, feeds each kind of malformed input to the readers and checks the
// error names the file and the problem, and checks that writes are atomic:
// a failed write leaves neither a partial target nor a temporary behind.
//
//===----------------------------------------------------------------------===//

#include "runtime/TensorFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Chrono.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

using namespace switchyard::runtime;

namespace {

constexpr ElementType kAllTypes[] = {
    ElementType::f32, ElementType::f16, ElementType::bf16, ElementType::f64,
    ElementType::i32, ElementType::i64, ElementType::u8,   ElementType::bool_};

/// A tensor with an arbitrary but reproducible byte pattern (0/1 for bool).
HostTensor patterned(std::string name, ElementType type,
                     std::vector<int64_t> shape) {
  HostTensor tensor{std::move(name), type, std::move(shape), {}};
  tensor.bytes.resize(tensor.numElements() * sizeOf(type));
  for (size_t i = 0; i < tensor.bytes.size(); ++i)
    tensor.bytes[i] = type == ElementType::bool_
                          ? (i * 7 + 3) % 5 % 2
                          : static_cast<uint8_t>(i * 37 + 11);
  return tensor;
}

/// The little-endian bytes of an 8-byte length field.
std::string le64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(value >> (8 * i));
  return bytes;
}

/// An npy file with header dict `dict`, padded the way NumPy pads it so the
/// data starts on a 64-byte boundary; used to build malformed inputs.
std::string npyFile(std::string_view dict, std::string_view data,
                    int major = 1) {
  size_t lengthSize = major == 1 ? 2 : 4;
  size_t unpadded = 8 + lengthSize + dict.size() + 1;
  size_t headerSize = dict.size() + 1 + (64 - unpadded % 64);
  std::string file("\x93NUMPY", 6);
  file += static_cast<char>(major);
  file += '\0';
  for (size_t i = 0; i < lengthSize; ++i)
    file += static_cast<char>(headerSize >> (8 * i));
  file += dict;
  file.append(headerSize - dict.size() - 1, ' ');
  file += '\n';
  file += data;
  return file;
}

/// A safetensors file with JSON header `header` and data buffer `data`.
std::string safetensorsFile(std::string_view header, std::string_view data) {
  return le64(header.size()) + std::string(header) + std::string(data);
}

/// The message of a failed result; an empty string (and a test failure)
/// when it did not fail.
template <typename T> std::string errorOf(llvm::Expected<T> result) {
  if (result) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(result.takeError());
}
std::string errorOf(llvm::Error error) {
  if (!error) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(std::move(error));
}

/// Whether `message` is `<path>: ...` and mentions `phrase`.
testing::AssertionResult isErrorAbout(const std::string &message,
                                      const std::string &path,
                                      std::string_view phrase) {
  if (message.rfind(path + ": ", 0) != 0)
    return testing::AssertionFailure()
           << "message does not start with '" << path << ": ': " << message;
  if (message.find(phrase) == std::string::npos)
    return testing::AssertionFailure()
           << "message lacks '" << phrase << "': " << message;
  return testing::AssertionSuccess();
}

class TensorFileTest : public testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(
        llvm::sys::fs::createUniqueDirectory("switchyard-tensorfile", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(llvm::StringRef name) const {
    llvm::SmallString<128> result(dir);
    llvm::sys::path::append(result, name);
    return std::string(result);
  }

  /// Writes `bytes` to the file `name` in the scratch directory and returns
  /// its path.
  std::string writeRaw(llvm::StringRef name, std::string_view bytes) {
    std::string file = path(name);
    std::error_code ec;
    llvm::raw_fd_ostream os(file, ec);
    EXPECT_FALSE(ec) << ec.message();
    os << llvm::StringRef(bytes.data(), bytes.size());
    return file;
  }

  std::string readRaw(llvm::StringRef name) {
    auto buffer = llvm::MemoryBuffer::getFile(path(name));
    EXPECT_TRUE(bool(buffer));
    return buffer ? (*buffer)->getBuffer().str() : "";
  }

  /// The names in the scratch directory, sorted.
  std::vector<std::string> listDir() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    std::sort(names.begin(), names.end());
    return names;
  }

  /// Reads the npy bytes `bytes` and checks the error is about `phrase`.
  void expectNpyError(std::string_view bytes, std::string_view phrase) {
    std::string file = writeRaw("bad.npy", bytes);
    EXPECT_TRUE(isErrorAbout(errorOf(readNpy(file)), file, phrase));
  }
  void expectSafetensorsError(std::string_view bytes, std::string_view phrase) {
    std::string file = writeRaw("bad.safetensors", bytes);
    EXPECT_TRUE(isErrorAbout(errorOf(readSafetensors(file)), file, phrase));
  }
  /// As expectSafetensorsError, for a file with this header and data.
  void expectHeaderError(std::string_view header, std::string_view data,
                         std::string_view phrase) {
    expectSafetensorsError(safetensorsFile(header, data), phrase);
  }

  llvm::SmallString<128> dir;
};

//===----------------------------------------------------------------------===//
// Element types and HostTensor
//===----------------------------------------------------------------------===//

TEST(ElementTypeTest, SizesNamesAndDTypes) {
  EXPECT_EQ(sizeOf(ElementType::f32), 4u);
  EXPECT_EQ(sizeOf(ElementType::bf16), 2u);
  EXPECT_EQ(sizeOf(ElementType::i64), 8u);
  EXPECT_EQ(sizeOf(ElementType::bool_), 1u);
  EXPECT_EQ(toString(ElementType::bool_), "bool");
  for (DType type : {DType::f32, DType::f16, DType::bf16}) {
    EXPECT_EQ(toDType(toElementType(type)), type);
    EXPECT_EQ(sizeOf(toElementType(type)), sizeOf(type));
  }
  EXPECT_EQ(toDType(ElementType::i32), std::nullopt);
}

TEST(ElementTypeTest, CountsElements) {
  EXPECT_EQ(checkedNumElements({}), 1);
  EXPECT_EQ(checkedNumElements({2, 0, 3}), 0);
  EXPECT_EQ(checkedNumElements({2, 3, 4}), 24);
  EXPECT_EQ(checkedNumElements({2, -1}), std::nullopt);
  EXPECT_EQ(checkedNumElements({int64_t(1) << 32, int64_t(1) << 31}),
            std::nullopt);
  EXPECT_EQ((HostTensor{"t", ElementType::f32, {-1}, {}}).numElements(), -1);
}

TEST(ElementTypeTest, TypedAccessors) {
  std::vector<float> values = {1.5f, -2.0f, 3.25f};
  HostTensor tensor =
      HostTensor::fromValues("x", ElementType::f32, {3}, values);
  EXPECT_EQ(tensor.bytes.size(), 12u);
  ASSERT_EQ(tensor.values<float>().size(), 3u);
  EXPECT_EQ(tensor.values<float>()[2], 3.25f);
  tensor.values<float>()[0] = 7.0f;
  EXPECT_EQ(tensor.values<float>()[0], 7.0f);
  // The wrong C++ type, or a byte count that disagrees with the shape,
  // gives an empty span rather than a misread.
  EXPECT_TRUE(tensor.values<double>().empty());
  EXPECT_TRUE(tensor.values<int32_t>().empty());
  tensor.bytes.pop_back();
  EXPECT_TRUE(tensor.values<float>().empty());

  std::vector<uint16_t> bits = {0x3f80, 0xc000};
  HostTensor bf16 = HostTensor::fromValues("b", ElementType::bf16, {2}, bits);
  ASSERT_EQ(bf16.values<uint16_t>().size(), 2u);
  EXPECT_EQ(bf16.values<uint16_t>()[1], 0xc000);
  HostTensor boolTensor{"m", ElementType::bool_, {2}, {1, 0}};
  ASSERT_EQ(boolTensor.values<bool>().size(), 2u);
  EXPECT_TRUE(boolTensor.values<bool>()[0]);
  EXPECT_FALSE(boolTensor.values<bool>()[1]);
}

//===----------------------------------------------------------------------===//
// npy round trips and fixtures
//===----------------------------------------------------------------------===//

TEST_F(TensorFileTest, NpyRoundTripsEveryNumPyType) {
  for (ElementType type : kAllTypes) {
    if (type == ElementType::bf16)
      continue;
    SCOPED_TRACE(toString(type));
    HostTensor tensor = patterned("", type, {2, 3});
    std::string file = path("t.npy");
    ASSERT_FALSE(llvm::errorToBool(writeNpy(file, tensor)));
    llvm::Expected<HostTensor> read = readNpy(file);
    ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
    EXPECT_EQ(*read, tensor);
  }
}

TEST_F(TensorFileTest, NpyRoundTripsRanksZeroToFour) {
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{
           {}, {5}, {2, 3}, {2, 3, 4}, {1, 2, 3, 2}, {0}, {3, 0, 2}}) {
    SCOPED_TRACE(testing::PrintToString(shape));
    HostTensor tensor = patterned("", ElementType::i32, shape);
    std::string file = path("t.npy");
    ASSERT_FALSE(llvm::errorToBool(writeNpy(file, tensor)));
    llvm::Expected<HostTensor> read = readNpy(file);
    ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
    EXPECT_EQ(*read, tensor);
    // Every header is padded so the data is 64-byte aligned.
    EXPECT_EQ((readRaw("t.npy").size() - tensor.bytes.size()) % 64, 0u);
  }
}

// np.save(f, np.arange(6, dtype=np.float32).reshape(2, 3)), NumPy >= 1.24:
// the dict is followed by room for the first axis to grow to 21 digits,
// then padded to 128 bytes.
const std::string kNumPyF32x2x3 =
    std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
    std::string(58, ' ') + "\n" +
    std::string("\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40"
                "\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40",
                24);

TEST_F(TensorFileTest, NpyReadsNumPyOutput) {
  ASSERT_EQ(kNumPyF32x2x3.size(), 128u + 24u);
  llvm::Expected<HostTensor> read =
      readNpy(writeRaw("numpy.npy", kNumPyF32x2x3));
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->type, ElementType::f32);
  EXPECT_EQ(read->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read->name, "");
  std::span<const float> values = read->values<float>();
  EXPECT_EQ(std::vector<float>(values.begin(), values.end()),
            (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST_F(TensorFileTest, NpyWritesWhatNumPyWrites) {
  std::vector<float> values = {0, 1, 2, 3, 4, 5};
  ASSERT_FALSE(llvm::errorToBool(
      writeNpy(path("ours.npy"),
               HostTensor::fromValues("", ElementType::f32, {2, 3}, values))));
  EXPECT_EQ(readRaw("ours.npy"), kNumPyF32x2x3);

  // np.save(f, np.array([True, False, True])).
  std::string boolFile =
      std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
      "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }" +
      std::string(60, ' ') + "\n" + std::string("\x01\x00\x01", 3);
  ASSERT_FALSE(llvm::errorToBool(writeNpy(
      path("bool.npy"), HostTensor{"", ElementType::bool_, {3}, {1, 0, 1}})));
  EXPECT_EQ(readRaw("bool.npy"), boolFile);

  // np.save(f, np.float64(2.5)): a rank-0 array has no growth axis.
  std::string scalarFile =
      std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
      "{'descr': '<f8', 'fortran_order': False, 'shape': (), }" +
      std::string(62, ' ') + "\n" +
      std::string("\x00\x00\x00\x00\x00\x00\x04\x40", 8);
  std::vector<double> scalar = {2.5};
  ASSERT_FALSE(llvm::errorToBool(
      writeNpy(path("scalar.npy"),
               HostTensor::fromValues("", ElementType::f64, {}, scalar))));
  EXPECT_EQ(readRaw("scalar.npy"), scalarFile);
}

TEST_F(TensorFileTest, NpyReadsEveryNumPyDescr) {
  struct Case {
    const char *dict;
    size_t spaces;
    std::string data;
    ElementType type;
    std::vector<int64_t> shape;
  };
  // np.arange(4, dtype=np.int64), np.array([1.0, -2.0], np.float16),
  // np.array([7, 9], np.int32), np.array([[1, 255]], np.uint8).
  const Case cases[] = {
      {"{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }",
       60,
       std::string("\0\0\0\0\0\0\0\0\1\0\0\0\0\0\0\0"
                   "\2\0\0\0\0\0\0\0\3\0\0\0\0\0\0\0",
                   32),
       ElementType::i64,
       {4}},
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
       60,
       std::string("\x00\x3c\x00\xc0", 4),
       ElementType::f16,
       {2}},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
       60,
       std::string("\x07\0\0\0\x09\0\0\0", 8),
       ElementType::i32,
       {2}},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2), }",
       58,
       std::string("\x01\xff", 2),
       ElementType::u8,
       {1, 2}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.dict);
    std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + c.dict +
                       std::string(c.spaces, ' ') + "\n" + c.data;
    ASSERT_EQ((file.size() - c.data.size()) % 64, 0u);
    llvm::Expected<HostTensor> read = readNpy(writeRaw("t.npy", file));
    ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
    EXPECT_EQ(read->type, c.type);
    EXPECT_EQ(read->shape, c.shape);
    EXPECT_EQ(std::string(read->bytes.begin(), read->bytes.end()), c.data);
  }
}

TEST_F(TensorFileTest, NpyReadsVersionsTwoAndThree) {
  // np.lib.format.write_array(f, np.array([[1, 2], [3, 4]], np.float16),
  // version=(2, 0)): a 4-byte header length.
  std::string v2 = std::string("\x93NUMPY\x02\x00\x74\x00\x00\x00", 12) +
                   "{'descr': '<f2', 'fortran_order': False, 'shape': (2, "
                   "2), }" +
                   std::string(56, ' ') + "\n" +
                   std::string("\x00\x3c\x00\x40\x00\x42\x00\x44", 8);
  llvm::Expected<HostTensor> read = readNpy(writeRaw("v2.npy", v2));
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->type, ElementType::f16);
  EXPECT_EQ(read->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(read->values<uint16_t>()[3], 0x4400);

  // version=(3, 0) (a UTF-8 header) of np.array([5, 6], np.uint8).
  std::string v3 = std::string("\x93NUMPY\x03\x00\x74\x00\x00\x00", 12) +
                   "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), "
                   "}" +
                   std::string(58, ' ') + "\n" + "\x05\x06";
  read = readNpy(writeRaw("v3.npy", v3));
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->bytes, (TensorBytes{5, 6}));
}

TEST_F(TensorFileTest, NpyReadsOldNumPyAndPython2Headers) {
  // NumPy < 1.14 under Python 2 aligned to 16 bytes and wrote long
  // integers with an L suffix: np.save(f, np.eye(2)).
  std::string file = std::string("\x93NUMPY\x01\x00\x46\x00", 10) +
                     "{'descr': '<f8', 'fortran_order': False, 'shape': (2L, "
                     "2L), }" +
                     std::string(8, ' ') + "\n";
  for (double value : {1.0, 0.0, 0.0, 1.0})
    file.append(reinterpret_cast<const char *>(&value), 8);
  llvm::Expected<HostTensor> read = readNpy(writeRaw("old.npy", file));
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(read->values<double>()[3], 1.0);

  // Keys in another order, double quotes and no trailing comma are all
  // valid Python and accepted.
  read = readNpy(writeRaw(
      "order.npy",
      npyFile(R"({"shape": (3,), "fortran_order": False, "descr": "<i4"})",
              std::string(12, '\0'))));
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->shape, (std::vector<int64_t>{3}));
}

TEST_F(TensorFileTest, NpyTransposesFortranOrder) {
  // np.save(f, np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)))
  // stores the columns [0 3] [1 4] [2 5] one after the other.
  std::string file = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                     "{'descr': '<i4', 'fortran_order': True, 'shape': (2, "
                     "3), }" +
                     std::string(59, ' ') + "\n";
  for (int32_t value : {0, 3, 1, 4, 2, 5})
    file.append(reinterpret_cast<const char *>(&value), 4);
  llvm::Expected<HostTensor> read = readNpy(writeRaw("f.npy", file));
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  std::span<const int32_t> values = read->values<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(values.begin(), values.end()),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));

  // Rank 3: element (i, j, k) of a column-major (2, 3, 4) array is at
  // i + 2j + 6k.
  std::string data;
  for (int32_t k = 0; k < 4; ++k)
    for (int32_t j = 0; j < 3; ++j)
      for (int32_t i = 0; i < 2; ++i) {
        int32_t value = 100 * i + 10 * j + k;
        data.append(reinterpret_cast<const char *>(&value), 4);
      }
  read = readNpy(writeRaw(
      "f3.npy",
      npyFile("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }",
              data)));
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  values = read->values<int32_t>();
  ASSERT_EQ(values.size(), 24u);
  for (int32_t i = 0; i < 2; ++i)
    for (int32_t j = 0; j < 3; ++j)
      for (int32_t k = 0; k < 4; ++k)
        EXPECT_EQ(values[i * 12 + j * 4 + k], 100 * i + 10 * j + k);
}

TEST_F(TensorFileTest, NpyFallsBackToVersionTwoForHugeHeaders) {
  // Like NumPy, a header too long for the 2-byte length field of version
  // 1.0 is written as version 2.0.
  HostTensor tensor =
      patterned("", ElementType::u8, std::vector<int64_t>(30000, 1));
  ASSERT_FALSE(llvm::errorToBool(writeNpy(path("wide.npy"), tensor)));
  EXPECT_EQ(readRaw("wide.npy")[6], '\x02');
  llvm::Expected<HostTensor> read = readNpy(path("wide.npy"));
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(*read, tensor);
}

//===----------------------------------------------------------------------===//
// safetensors round trips and fixtures
//===----------------------------------------------------------------------===//

TEST_F(TensorFileTest, SafetensorsRoundTripsEveryType) {
  std::vector<HostTensor> tensors;
  for (ElementType type : kAllTypes)
    tensors.push_back(
        patterned("t." + std::string(toString(type)), type, {3, 2}));
  std::string file = path("all.safetensors");
  ASSERT_FALSE(llvm::errorToBool(writeSafetensors(file, tensors)));
  llvm::Expected<std::vector<HostTensor>> read = readSafetensors(file);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(*read, tensors); // In the order written.
}

TEST_F(TensorFileTest, SafetensorsRoundTripsRanksZeroToFour) {
  std::vector<HostTensor> tensors = {
      patterned("scalar", ElementType::f32, {}),
      patterned("empty", ElementType::f32, {0}),
      patterned("vector", ElementType::bf16, {5}),
      patterned("matrix", ElementType::f16, {2, 3}),
      patterned("rank3", ElementType::i64, {2, 3, 4}),
      patterned("rank4", ElementType::u8, {1, 2, 3, 2}),
      patterned("empty3", ElementType::f64, {3, 0, 2}),
  };
  std::string file = path("ranks.safetensors");
  ASSERT_FALSE(llvm::errorToBool(writeSafetensors(file, tensors)));
  llvm::Expected<std::vector<HostTensor>> read = readSafetensors(file);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(*read, tensors);
  // The data buffer starts 8-byte aligned.
  std::string bytes = readRaw("ranks.safetensors");
  uint64_t headerSize;
  std::memcpy(&headerSize, bytes.data(), 8);
  EXPECT_EQ(headerSize % 8, 0u);

  // An empty file: no tensors, no metadata.
  ASSERT_FALSE(llvm::errorToBool(writeSafetensors(path("none"), {})));
  read = readSafetensors(path("none"));
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_TRUE(read->empty());
}

TEST_F(TensorFileTest, SafetensorsRoundTripsMetadata) {
  TensorMetadata metadata = {{"format", "pt"},
                             {"model", "switchhead-47M"},
                             {"quote\"and\\slash", "tab\there, ünïcode"},
                             {"empty", ""}};
  std::string file = path("meta.safetensors");
  ASSERT_FALSE(llvm::errorToBool(writeSafetensors(
      file, {patterned("w", ElementType::f32, {2})}, metadata)));
  TensorMetadata read = {{"stale", "entry"}};
  llvm::Expected<std::vector<HostTensor>> tensors =
      readSafetensors(file, &read);
  ASSERT_TRUE(bool(tensors)) << llvm::toString(tensors.takeError());
  EXPECT_EQ(read, metadata);

  // Without __metadata__ the map comes back empty.
  ASSERT_FALSE(llvm::errorToBool(
      writeSafetensors(file, {patterned("w", ElementType::f32, {2})})));
  tensors = readSafetensors(file, &read);
  ASSERT_TRUE(bool(tensors)) << llvm::toString(tensors.takeError());
  EXPECT_TRUE(read.empty());
}

TEST_F(TensorFileTest, SafetensorsWritesTheReferenceLayout) {
  std::vector<float> one = {1.0f};
  ASSERT_FALSE(llvm::errorToBool(writeSafetensors(
      path("ref.safetensors"),
      {HostTensor::fromValues("a", ElementType::f32, {1}, one)},
      {{"k", "v"}})));
  std::string header = "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":"
                       "\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} ";
  ASSERT_EQ(header.size(), 80u);
  EXPECT_EQ(readRaw("ref.safetensors"),
            safetensorsFile(header, std::string("\x00\x00\x80\x3f", 4)));
}

TEST_F(TensorFileTest, SafetensorsReadsLibraryOutput) {
  // safetensors.numpy.save({"a": np.array([1, 2], np.float32),
  //                         "b": np.zeros((2, 2), np.int64)},
  //                        metadata={"format": "np"}): the library puts
  // __metadata__ first, orders tensors by alignment, then name, and pads
  // the header with spaces to a multiple of 8 bytes.
  std::string header =
      "{\"__metadata__\":{\"format\":\"np\"},\"b\":{\"dtype\":\"I64\","
      "\"shape\":[2,2],\"data_offsets\":[0,32]},\"a\":{\"dtype\":\"F32\","
      "\"shape\":[2],\"data_offsets\":[32,40]}} ";
  ASSERT_EQ(header.size(), 144u);
  std::string data(32, '\0');
  data += std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  TensorMetadata metadata;
  llvm::Expected<std::vector<HostTensor>> read = readSafetensors(
      writeRaw("lib.safetensors", safetensorsFile(header, data)), &metadata);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  ASSERT_EQ(read->size(), 2u);
  // In data order.
  EXPECT_EQ((*read)[0].name, "b");
  EXPECT_EQ((*read)[0].type, ElementType::i64);
  EXPECT_EQ((*read)[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ((*read)[1].name, "a");
  EXPECT_EQ((*read)[1].values<float>()[1], 2.0f);
  EXPECT_EQ(metadata, (TensorMetadata{{"format", "np"}}));
}

//===----------------------------------------------------------------------===//
// Malformed npy files
//===----------------------------------------------------------------------===//

TEST_F(TensorFileTest, NpyMissingFile) {
  std::string file = path("absent.npy");
  EXPECT_TRUE(isErrorAbout(errorOf(readNpy(file)), file, "cannot read file"));
}

TEST_F(TensorFileTest, NpyTruncatedFile) {
  expectNpyError("", "truncated file");
  expectNpyError(std::string("\x93NUM", 4), "truncated file");
  expectNpyError(std::string("\x93NUMPY\x01\x00\x76", 9), "truncated file");
}

TEST_F(TensorFileTest, NpyHeaderLongerThanFile) {
  expectNpyError(kNumPyF32x2x3.substr(0, 100), "truncated header");
  // A version 2.0 header length of 4 GiB - 1.
  expectNpyError(std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14),
                 "truncated header");
}

TEST_F(TensorFileTest, NpyDataShorterThanShape) {
  expectNpyError(kNumPyF32x2x3.substr(0, kNumPyF32x2x3.size() - 1),
                 "truncated data (expected 24 bytes");
  expectNpyError(
      npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", ""),
      "truncated data (expected 4 bytes");
}

TEST_F(TensorFileTest, NpyTrailingData) {
  expectNpyError(kNumPyF32x2x3 + "x", "trailing bytes after the data");
}

TEST_F(TensorFileTest, NpyBadMagic) {
  expectNpyError("PK\x03\x04 a zip file, maybe an .npz", "bad magic");
  expectNpyError(std::string("\x93NUMPX\x01\x00", 8), "bad magic");
}

TEST_F(TensorFileTest, NpyUnsupportedVersion) {
  std::string file = kNumPyF32x2x3;
  file[6] = '\x04';
  expectNpyError(file, "unsupported npy format version 4.0");
  file[6] = '\x01';
  file[7] = '\x01';
  expectNpyError(file, "unsupported npy format version 1.1");
  file[6] = '\x00';
  file[7] = '\x00';
  expectNpyError(file, "unsupported npy format version 0.0");
}

TEST_F(TensorFileTest, NpyBigEndian) {
  expectNpyError(
      npyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
              std::string(4, '\0')),
      "big-endian dtype descr '>f4' is not supported (expected '<f4')");
  // Byte order does not matter for single bytes.
  std::string file = writeRaw(
      "u1.npy",
      npyFile("{'descr': '>u1', 'fortran_order': False, 'shape': (1,), }",
              "x"));
  EXPECT_TRUE(bool(readNpy(file)));
}

TEST_F(TensorFileTest, NpyUnsupportedDescr) {
  for (const char *descr :
       {"'<c8'", "'|O'", "'<U5'", "'=f4'", "'|f4'", "'<u2'", "''",
        "[('a', '<f4'), ('b', '<i4')]", "('<f4', (2,))", "3"}) {
    SCOPED_TRACE(descr);
    expectNpyError(npyFile(std::string("{'descr': ") + descr +
                               ", 'fortran_order': False, 'shape': (1,), }",
                           std::string(16, '\0')),
                   "dtype descr");
  }
  expectNpyError(
      npyFile("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
              std::string(8, '\0')),
      "unsupported dtype descr '<c8' (expected one of '<f4'");
}

TEST_F(TensorFileTest, NpyFortranOrderMustBeBool) {
  expectNpyError(
      npyFile("{'descr': '<f4', 'fortran_order': 1, 'shape': (1,), }",
              std::string(4, '\0')),
      "invalid fortran_order (expected True or False, found 1)");
}

TEST_F(TensorFileTest, NpyMalformedHeaderDict) {
  const std::pair<const char *, const char *> cases[] = {
      {"[1, 2]", "not a dict"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'descr': '<f4', 'shape': (1,)}", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
       "unexpected key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
       "'shape': (1,)}",
       "duplicate key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
       "expected ',' or '}'"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}",
       "malformed npy header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk",
       "unexpected text after the dict"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}",
       "expected ',' or '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}",
       "expected ':'"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (1,)}",
       "expected a value"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}",
       "unexpected name"},
      {"{1: '<f4', 'fortran_order': False, 'shape': (1,)}",
       "unexpected key 1 (expected 'descr'"},
      {"", "expected a value"},
  };
  for (auto [dict, phrase] : cases) {
    SCOPED_TRACE(dict);
    expectNpyError(npyFile(dict, std::string(4, '\0')), phrase);
  }
  // Deep nesting is refused rather than overflowing the stack.
  std::string deep = "{'descr': " + std::string(100000, '(') + "1" +
                     std::string(100000, ')') + "}";
  expectNpyError(npyFile(deep, "", 2), "nested too deeply");
  // A header that is not text at all.
  expectNpyError(npyFile(std::string("\x00\xff\x80", 3), ""),
                 "malformed npy header");
}

TEST_F(TensorFileTest, NpyInvalidShape) {
  const std::pair<const char *, const char *> cases[] = {
      {"(-1,)", "invalid shape entry (expected a non-negative integer, "
                "found -1)"},
      {"(2, -3)", "found -3"},
      {"(2.5,)", "found 2.5"},
      {"(2, 1e3)", "found 1e3"},
      {"('2',)", "found '2'"},
      {"(None,)", "found None"},
      {"(True,)", "found True"},
      {"((2,),)", "found (2,)"},
      {"(99999999999999999999,)", "found 99999999999999999999"},
      {"[2, 3]", "invalid shape (expected a tuple of non-negative integers, "
                 "found [2, 3])"},
      {"(3)", "invalid shape (expected a tuple"},
      {"'(3,)'", "invalid shape (expected a tuple"},
  };
  for (auto [shape, phrase] : cases) {
    SCOPED_TRACE(shape);
    expectNpyError(npyFile(std::string("{'descr': '<f4', 'fortran_order': "
                                       "False, 'shape': ") +
                               shape + ", }",
                           std::string(24, '\0')),
                   phrase);
  }
}

TEST_F(TensorFileTest, NpyElementCountOverflow) {
  // 2^32 · 2^32 elements, and 2^61 · 2 elements of 4 bytes.
  expectNpyError(npyFile("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (4294967296, 4294967296), }",
                         ""),
                 "overflows int64");
  expectNpyError(npyFile("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2305843009213693952, 2), }",
                         ""),
                 "overflows int64");
  // A large but representable size is simply truncated data.
  expectNpyError(npyFile("{'descr': '<f8', 'fortran_order': False, "
                         "'shape': (1000000000, 1000000000), }",
                         ""),
                 "truncated data");
}

TEST_F(TensorFileTest, NpyInvalidBool) {
  expectNpyError(
      npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
              std::string("\x01\x00\x02", 3)),
      "invalid bool value at element 2 (expected 0 or 1, found 2)");
}

//===----------------------------------------------------------------------===//
// Malformed safetensors files
//===----------------------------------------------------------------------===//

const char *const kOneTensor =
    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST_F(TensorFileTest, SafetensorsAcceptsTheOneTensorFixture) {
  // The baseline the malformed cases below perturb.
  std::string file =
      writeRaw("ok.safetensors", safetensorsFile(kOneTensor, "01234567"));
  llvm::Expected<std::vector<HostTensor>> read = readSafetensors(file);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->size(), 1u);
}

TEST_F(TensorFileTest, SafetensorsMissingFile) {
  std::string file = path("absent.safetensors");
  EXPECT_TRUE(
      isErrorAbout(errorOf(readSafetensors(file)), file, "cannot read file"));
}

TEST_F(TensorFileTest, SafetensorsTruncated) {
  expectSafetensorsError("", "truncated file");
  expectSafetensorsError("\x10\x00\x00", "truncated file");
  // The header length is larger than the file.
  expectSafetensorsError(le64(1000) + kOneTensor, "truncated header");
  std::string whole = safetensorsFile(kOneTensor, "01234567");
  expectSafetensorsError(whole.substr(0, 20), "truncated header");
  // Data shorter than the offsets say.
  expectSafetensorsError(whole.substr(0, whole.size() - 1),
                         "data_offsets [0, 8] out of range (expected end <= "
                         "7");
}

TEST_F(TensorFileTest, SafetensorsAbsurdHeaderLength) {
  expectSafetensorsError(le64(uint64_t(1) << 40) + "{}",
                         "header length is absurd (expected at most "
                         "100000000 bytes, found 1099511627776)");
  expectSafetensorsError(le64(~uint64_t(0)) + "{}", "header length is absurd");
  expectSafetensorsError(le64(100'000'001) + "{}", "header length is absurd");
}

TEST_F(TensorFileTest, SafetensorsInvalidJson) {
  for (const char *header :
       {"", "{", "{\"a\":}", "{\"a\":{\"dtype\":\"F32\",}}", "nope", "{} {}",
        "{'a': 1}", "{\"a\":\"\xff\"}"}) {
    SCOPED_TRACE(header);
    expectHeaderError(header, "", "invalid JSON header");
  }
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expectHeaderError(deep, "", "nested more than 64 levels deep");
}

TEST_F(TensorFileTest, SafetensorsHeaderNotObject) {
  expectHeaderError("[]", "", "header is not a JSON object");
  expectHeaderError("\"x\"", "", "header is not a JSON object");
}

TEST_F(TensorFileTest, SafetensorsEntryNotObject) {
  expectHeaderError(R"({"a":5})", "",
                    "tensor 'a': entry is not an object (expected");
  expectHeaderError(R"({"a":[1,2]})", "", "found an array");
}

TEST_F(TensorFileTest, SafetensorsUnknownDType) {
  for (const char *dtype :
       {"\"C64\"", "\"F8_E4M3\"", "\"I8\"", "\"f32\"", "\"\"", "3", "null"}) {
    SCOPED_TRACE(dtype);
    expectHeaderError(std::string(R"({"a":{"dtype":)") + dtype +
                          R"(,"shape":[2],"data_offsets":[0,8]}})",
                      "01234567", "tensor 'a': unsupported dtype");
  }
  expectHeaderError(
      R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", "01234567",
      "unsupported dtype \"C64\" (expected one of F32, F16, BF16");
}

TEST_F(TensorFileTest, SafetensorsMissingOrUnexpectedKeys) {
  expectHeaderError(R"({"a":{"dtype":"F32","shape":[2]}})", "",
                    "tensor 'a': missing key \"data_offsets\"");
  expectHeaderError(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", "01234567",
                    "missing key \"dtype\"");
  expectHeaderError(R"({"a":{"dtype":"F32","shape":[2],"data_offset":[0,8]}})",
                    "01234567", "unexpected key 'data_offset'");
}

TEST_F(TensorFileTest, SafetensorsInvalidShape) {
  for (const char *shape :
       {"[-1]", "[2.5]", "[\"2\"]", "[[2]]", "[null]", "[1e400]"}) {
    SCOPED_TRACE(shape);
    expectHeaderError(std::string(R"({"a":{"dtype":"F32","shape":)") + shape +
                          R"(,"data_offsets":[0,8]}})",
                      "01234567", "tensor 'a': invalid shape entry");
  }
  expectHeaderError(
      R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", "01234567",
      "invalid shape (expected an array of non-negative integers, found 2)");
}

TEST_F(TensorFileTest, SafetensorsElementCountOverflow) {
  expectHeaderError(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
                    R"("data_offsets":[0,8]}})",
                    "01234567", "overflows int64");
  expectHeaderError(R"({"a":{"dtype":"I64","shape":[2305843009213693952],)"
                    R"("data_offsets":[0,8]}})",
                    "01234567", "overflows int64");
}

TEST_F(TensorFileTest, SafetensorsInvalidOffsets) {
  for (const char *offsets :
       {"[0]", "[0,8,16]", "[-8,0]", "[0,8.5]", "[\"0\",\"8\"]", "{}",
        "[0,18446744073709551615]"}) {
    SCOPED_TRACE(offsets);
    expectHeaderError(std::string(R"({"a":{"dtype":"F32","shape":[2],)") +
                          R"("data_offsets":)" + offsets + "}}",
                      "01234567", "tensor 'a': invalid data_offsets");
  }
  expectHeaderError(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})",
                    "01234567", "data_offsets [8, 0] are reversed");
}

TEST_F(TensorFileTest, SafetensorsOffsetsDoNotMatchShape) {
  expectHeaderError(
      R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "01234567",
      "data_offsets [0, 8] do not match shape [3] and dtype F32 (expected 12 "
      "bytes, found 8)");
  expectHeaderError(
      R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}})", "01234567",
      "do not match");
}

TEST_F(TensorFileTest, SafetensorsOffsetsOutOfRange) {
  expectHeaderError(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", "01234567",
      "tensor 'a': data_offsets [8, 16] out of range");
}

TEST_F(TensorFileTest, SafetensorsOverlappingOffsets) {
  expectHeaderError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    "01234567",
                    "overlapping tensors: tensor 'b' after tensor 'a' "
                    "(expected it to begin at 8, found 4)");
  // Identical ranges overlap too.
  expectHeaderError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
                    "01234567", "overlapping tensors");
}

TEST_F(TensorFileTest, SafetensorsGapsInTheBuffer) {
  expectHeaderError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                    "0123456789ab",
                    "gap in the data buffer: tensor 'b' after tensor 'a' "
                    "(expected it to begin at 4, found 8)");
  expectHeaderError(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "01234567",
      "gap in the data buffer: tensor 'a' at the start of the data buffer");
  expectHeaderError(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "01234567",
      "unused bytes at the end of the data buffer (expected 4 bytes, found "
      "8)");
  expectHeaderError("{}", "x", "unused bytes at the end of the data buffer");
}

TEST_F(TensorFileTest, SafetensorsDuplicateNames) {
  expectHeaderError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    "01234567", "duplicate tensor name 'a'");
  // The same name spelled with an escape.
  expectHeaderError(
      R"({"ab":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("a\u0062":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      "01234567", "duplicate tensor name 'ab'");
  // Duplicate keys inside an entry or the metadata.
  expectHeaderError(
      R"({"a":{"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
      "01234567", "duplicate JSON key 'dtype'");
  expectHeaderError(R"({"__metadata__":{"k":"1","k":"2"}})", "",
                    "duplicate JSON key 'k'");
  // Keys that are equal to string values elsewhere are not duplicates.
  std::string file =
      writeRaw("ok.safetensors",
               safetensorsFile(
                   R"({"__metadata__":{"dtype":"dtype","a":"shape"},)"
                   R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                   "01234567"));
  EXPECT_TRUE(bool(readSafetensors(file)));
}

TEST_F(TensorFileTest, SafetensorsInvalidMetadata) {
  expectHeaderError(R"({"__metadata__":[1]})", "",
                    "\"__metadata__\" is not an object");
  expectHeaderError(R"({"__metadata__":{"epoch":3}})", "",
                    "\"__metadata__\" entry 'epoch' is not a string");
}

TEST_F(TensorFileTest, SafetensorsInvalidBool) {
  expectHeaderError(
      R"({"m":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})",
      std::string("\x00\x01\x01\xff", 4),
      "tensor 'm': invalid bool value at element 3 (expected 0 or 1, found "
      "255)");
}

//===----------------------------------------------------------------------===//
// Writers: invalid tensors and atomicity
//===----------------------------------------------------------------------===//

TEST_F(TensorFileTest, WritersRejectInconsistentTensors) {
  std::string file = path("t.npy");
  EXPECT_TRUE(isErrorAbout(
      errorOf(writeNpy(file, patterned("", ElementType::bf16, {2}))), file,
      "NumPy has no dtype for bf16"));
  HostTensor shortTensor = patterned("", ElementType::f32, {2, 3});
  shortTensor.bytes.pop_back();
  EXPECT_TRUE(isErrorAbout(errorOf(writeNpy(file, shortTensor)), file,
                           "byte size does not match shape [2, 3] and type "
                           "f32 (expected 24 bytes, found 23)"));
  EXPECT_TRUE(isErrorAbout(
      errorOf(writeNpy(file, HostTensor{"", ElementType::f32, {-2}, {}})), file,
      "invalid shape [-2]"));
  EXPECT_TRUE(isErrorAbout(
      errorOf(writeNpy(file, HostTensor{"", ElementType::bool_, {1}, {2}})),
      file, "invalid bool value"));

  std::string st = path("t.safetensors");
  HostTensor a = patterned("a", ElementType::f32, {2});
  EXPECT_TRUE(isErrorAbout(errorOf(writeSafetensors(st, {a, a})), st,
                           "duplicate tensor name 'a'"));
  HostTensor reserved = patterned("__metadata__", ElementType::f32, {2});
  EXPECT_TRUE(
      isErrorAbout(errorOf(writeSafetensors(st, {reserved})), st, "reserved"));
  HostTensor badName = patterned("\xff", ElementType::f32, {2});
  EXPECT_TRUE(isErrorAbout(errorOf(writeSafetensors(st, {badName})), st,
                           "not valid UTF-8"));
  EXPECT_TRUE(isErrorAbout(errorOf(writeSafetensors(st, {a}, {{"k", "\xc3"}})),
                           st, "not valid UTF-8"));
  EXPECT_TRUE(isErrorAbout(errorOf(writeSafetensors(st, {shortTensor})), st,
                           "byte size does not match"));
  // Nothing was written.
  EXPECT_TRUE(listDir().empty());
}

TEST_F(TensorFileTest, WriteIntoMissingDirectoryFailsCleanly) {
  std::string file = path("missing/t.npy");
  EXPECT_TRUE(isErrorAbout(
      errorOf(writeNpy(file, patterned("", ElementType::f32, {2}))), file,
      "cannot create a temporary file"));
  file = path("missing/t.safetensors");
  EXPECT_TRUE(isErrorAbout(
      errorOf(writeSafetensors(file, {patterned("a", ElementType::f32, {2})})),
      file, "cannot create a temporary file"));
  EXPECT_TRUE(listDir().empty());
}

TEST_F(TensorFileTest, WriteReplacesExistingFileCompletely) {
  HostTensor big = patterned("", ElementType::f64, {64, 64});
  HostTensor small = patterned("", ElementType::u8, {3});
  std::string file = path("t.npy");
  ASSERT_FALSE(llvm::errorToBool(writeNpy(file, big)));
  ASSERT_FALSE(llvm::errorToBool(writeNpy(file, small)));
  EXPECT_EQ(readRaw("t.npy").size(), 128u + 3u);
  llvm::Expected<HostTensor> read = readNpy(file);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(*read, small);

  std::string st = path("t.safetensors");
  ASSERT_FALSE(llvm::errorToBool(
      writeSafetensors(st, {patterned("a", ElementType::f32, {100}),
                            patterned("b", ElementType::f32, {100})})));
  ASSERT_FALSE(llvm::errorToBool(
      writeSafetensors(st, {patterned("c", ElementType::u8, {1})})));
  llvm::Expected<std::vector<HostTensor>> tensors = readSafetensors(st);
  ASSERT_TRUE(bool(tensors)) << llvm::toString(tensors.takeError());
  ASSERT_EQ(tensors->size(), 1u);
  EXPECT_EQ((*tensors)[0].name, "c");
  // No temporaries remain.
  EXPECT_EQ(listDir(), (std::vector<std::string>{"t.npy", "t.safetensors"}));
}

TEST_F(TensorFileTest, FailedRenameLeavesNoTemporary) {
  // The target is a non-empty directory: the temporary is written, the
  // rename fails, and the temporary is removed again.
  ASSERT_FALSE(llvm::sys::fs::create_directory(path("target")));
  writeRaw("target/keep", "x");
  std::string file = path("target");
  EXPECT_TRUE(isErrorAbout(
      errorOf(writeNpy(file, patterned("", ElementType::f32, {2}))), file,
      "cannot rename temporary file"));
  EXPECT_TRUE(isErrorAbout(
      errorOf(writeSafetensors(file, {patterned("a", ElementType::f32, {2})})),
      file, "cannot rename temporary file"));
  EXPECT_EQ(listDir(), (std::vector<std::string>{"target"}));
}

TEST_F(TensorFileTest, CheckWritableBeforeLongWork) {
  EXPECT_FALSE(llvm::errorToBool(checkWritable(path("new.json"))));
  std::string missing = path("missing/new.json");
  EXPECT_TRUE(isErrorAbout(errorOf(checkWritable(missing)), missing,
                           "directory"));
  ASSERT_FALSE(llvm::sys::fs::create_directory(path("dir")));
  EXPECT_TRUE(isErrorAbout(errorOf(checkWritable(path("dir"))), path("dir"),
                           "it is a directory"));
  // The probe leaves nothing behind.
  EXPECT_EQ(listDir(), (std::vector<std::string>{"dir"}));
}

TEST_F(TensorFileTest, TextFilesAreWrittenAtomically) {
  std::string file = path("summary.json");
  ASSERT_FALSE(llvm::errorToBool(writeTextFile(file, "{\"a\": 1}\n")));
  ASSERT_FALSE(llvm::errorToBool(writeTextFile(file, "{}\n")));
  EXPECT_EQ(readRaw("summary.json"), "{}\n");
  EXPECT_EQ(listDir(), (std::vector<std::string>{"summary.json"}));
}

TEST_F(TensorFileTest, PipesAndDevicesAreWrittenInPlace) {
  // A FIFO (as /dev/null or /dev/stdout would be) is written, not replaced
  // by a renamed temporary.
  std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    received.assign(std::istreambuf_iterator<char>(in), {});
  });
  EXPECT_FALSE(llvm::errorToBool(writeTextFile(fifo, "through the pipe")));
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  llvm::sys::fs::file_status status;
  ASSERT_FALSE(llvm::sys::fs::status(fifo, status));
  EXPECT_EQ(status.type(), llvm::sys::fs::file_type::fifo_file);
  EXPECT_FALSE(llvm::errorToBool(checkWritable(fifo)));
  EXPECT_EQ(listDir(), (std::vector<std::string>{"pipe"}));
}

TEST_F(TensorFileTest, SymbolicLinksKeepPointingAtTheirTarget) {
  writeRaw("real.json", "old");
  ASSERT_FALSE(llvm::sys::fs::create_link(path("real.json"), path("link.json")));
  ASSERT_FALSE(llvm::errorToBool(writeTextFile(path("link.json"), "new")));
  EXPECT_EQ(readRaw("real.json"), "new");
  llvm::sys::fs::file_status link;
  ASSERT_FALSE(llvm::sys::fs::status(path("link.json"), link, false));
  EXPECT_EQ(link.type(), llvm::sys::fs::file_type::symlink_file);
  EXPECT_EQ(listDir(), (std::vector<std::string>{"link.json", "real.json"}));
}

TEST_F(TensorFileTest, StaleTemporariesAreRemoved) {
  // Left by writers that died: a process of this machine that is gone (no
  // process has id 2^31 - 2), and one of another machine or without a
  // writer's name, an hour old. Kept: a live writer's (this process), a
  // fresh one of another machine, and another file's.
  std::string target = path("c.safetensors");
  std::string dead = temporaryPrefix(target, 2147483646) + "abcdefgh";
  std::string live = temporaryPrefix(target, ::getpid()) + "abcdefgh";
  writeRaw(dead, "x");
  writeRaw(live, "x");
  writeRaw(".c.safetensors.tmp-otherhost-12-abcdefgh", "x");
  writeRaw(".c.safetensors.tmp-old", "x");
  writeRaw(temporaryPrefix(path("d.safetensors"), 2147483646) + "abcdefgh",
           "x");
  auto twoHoursAgo = std::chrono::system_clock::now() - std::chrono::hours(2);
  int fd;
  ASSERT_FALSE(llvm::sys::fs::openFileForWrite(
      path(".c.safetensors.tmp-old"), fd, llvm::sys::fs::CD_OpenExisting));
  ASSERT_FALSE(llvm::sys::fs::setLastAccessAndModificationTime(
      fd, llvm::sys::toTimePoint(
              std::chrono::system_clock::to_time_t(twoHoursAgo))));
  ::close(fd);
  EXPECT_EQ(removeStaleTemporaries(target), 2u);
  std::vector<std::string> left = listDir();
  EXPECT_EQ(left.size(), 3u);
  for (const std::string &gone : {dead, std::string(".c.safetensors.tmp-old")})
    EXPECT_EQ(std::count(left.begin(), left.end(), gone), 0) << gone;
  for (const std::string &kept :
       {live, std::string(".c.safetensors.tmp-otherhost-12-abcdefgh")})
    EXPECT_EQ(std::count(left.begin(), left.end(), kept), 1) << kept;
}

TEST_F(TensorFileTest, PercentInFileNameIsKept) {
  // '%' is a placeholder in LLVM's temporary file models; the target name
  // must still be used verbatim.
  std::string file = path("100%.npy");
  ASSERT_FALSE(
      llvm::errorToBool(writeNpy(file, patterned("", ElementType::u8, {1}))));
  EXPECT_EQ(listDir(), (std::vector<std::string>{"100%.npy"}));
}

} // namespace

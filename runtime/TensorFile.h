//===- TensorFile.h - NumPy .npy and safetensors file I/O -------*- C++ -*-===//
//
// Reads and writes host tensors in the two interchange formats the runtime
// meets in practice: NumPy's `.npy` (one array a file; format versions 1.0,
// 2.0 and 3.0 are read, 1.0 is written) and Hugging Face's `safetensors`
// (many named arrays a file, plus an optional string-to-string metadata map).
//
// Readers never trust their input: every malformed, truncated or
// unsupported file yields an llvm::Error whose message has the form
// `<path>: <what is wrong> (expected ..., found ...)`. Writers are atomic:
// the data goes to a temporary file in the target's directory which is
// flushed, fsync'ed and renamed over the target, so a reader sees either the
// old file or the complete new one, never a half-written file. A target
// that is a device or a pipe (/dev/null, /dev/stdout) is written in place.
//
// Tensor data is stored little-endian, in row-major (C) order, exactly as
// the bytes appear in the files; the runtime only supports little-endian
// hosts (x86-64, AArch64), which TensorFile.cpp checks at compile time.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_TENSORFILE_H
#define SWITCHYARD_RUNTIME_TENSORFILE_H

#include "runtime/BufferCache.h"
#include "runtime/Params.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace switchyard::runtime {

/// Element types a tensor file may hold. A superset of DType: parameters
/// are f32/f16/bf16, but checkpoints and test vectors also carry indices,
/// masks and reference outputs.
enum class ElementType : uint8_t { f32, f16, bf16, f64, i32, i64, u8, bool_ };

/// The name of `type` as the runtime spells it ("f32", ..., "bool").
std::string_view toString(ElementType type);
/// The size of one element in bytes.
size_t sizeOf(ElementType type);
/// The parameter DType with the same encoding, if there is one.
std::optional<DType> toDType(ElementType type);
/// The tensor element type with the same encoding as `type`.
ElementType toElementType(DType type);

/// True when T is the C++ type that holds one element of `type`: float,
/// double, int32_t, int64_t, uint8_t and bool for f32, f64, i32, i64, u8 and
/// bool_; uint16_t (the raw bits) for both f16 and bf16.
template <typename T> constexpr bool isStorageTypeOf(ElementType type) {
  switch (type) {
  case ElementType::f32:
    return std::is_same_v<T, float>;
  case ElementType::f16:
  case ElementType::bf16:
    return std::is_same_v<T, uint16_t>;
  case ElementType::f64:
    return std::is_same_v<T, double>;
  case ElementType::i32:
    return std::is_same_v<T, int32_t>;
  case ElementType::i64:
    return std::is_same_v<T, int64_t>;
  case ElementType::u8:
    return std::is_same_v<T, uint8_t>;
  case ElementType::bool_:
    return std::is_same_v<T, bool>;
  }
  return false;
}

/// The number of elements of `shape`, or std::nullopt when a dimension is
/// negative or the product does not fit in int64_t. A rank-0 shape has one
/// element.
std::optional<int64_t> checkedNumElements(llvm::ArrayRef<int64_t> shape);

/// The bytes of a HostTensor: one block from the compiled CPU code's buffer
/// cache (runtime/BufferCache.h), so that the tensors a program returns on
/// every call (a training step's parameters and moments) take the blocks
/// of the ones freed before them instead of fresh pages the kernel faults
/// in and zeroes; a block the compiled code returned can be taken over
/// without a copy (adopt). A vector of bytes otherwise, with one
/// difference: resize leaves the new bytes unspecified (write them).
class TensorBytes {
public:
  using value_type = uint8_t;
  using size_type = size_t;
  using iterator = uint8_t *;
  using const_iterator = const uint8_t *;

  TensorBytes() = default;
  explicit TensorBytes(size_t count) { resize(count); }
  template <typename Iterator> TensorBytes(Iterator first, Iterator last) {
    assign(first, last);
  }
  TensorBytes(std::initializer_list<uint8_t> bytes) {
    assign(bytes.begin(), bytes.end());
  }
  TensorBytes(const TensorBytes &other) { assign(other.begin(), other.end()); }
  TensorBytes(TensorBytes &&other) noexcept { swap(other); }
  TensorBytes &operator=(const TensorBytes &other) {
    if (this != &other)
      assign(other.begin(), other.end());
    return *this;
  }
  TensorBytes &operator=(TensorBytes &&other) noexcept {
    TensorBytes moved(std::move(other));
    swap(moved);
    return *this;
  }
  ~TensorBytes();

  /// Takes over `block` (from switchyardBufferAlloc; freed with
  /// switchyardBufferFree) whose `count` bytes from `first` are the tensor's.
  static TensorBytes adopt(void *block, uint8_t *first, size_t count);

  uint8_t *data() { return first; }
  const uint8_t *data() const { return first; }
  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  iterator begin() { return first; }
  iterator end() { return first + count; }
  const_iterator begin() const { return first; }
  const_iterator end() const { return first + count; }
  uint8_t &operator[](size_t i) { return first[i]; }
  uint8_t operator[](size_t i) const { return first[i]; }

  /// Keeps the first min(size(), `newCount`) bytes; the rest unspecified.
  void resize(size_t newCount);
  void pop_back() { --count; }
  template <typename Iterator> void assign(Iterator from, Iterator to) {
    count = 0;
    resize(size_t(std::distance(from, to)));
    std::copy(from, to, first);
  }
  void swap(TensorBytes &other) noexcept {
    std::swap(block, other.block);
    std::swap(first, other.first);
    std::swap(count, other.count);
    std::swap(capacity, other.capacity);
  }
  friend bool operator==(const TensorBytes &a, const TensorBytes &b) {
    return a.count == b.count &&
           (a.count == 0 || std::memcmp(a.first, b.first, a.count) == 0);
  }

private:
  void *block = nullptr;
  uint8_t *first = nullptr;
  size_t count = 0, capacity = 0;
};

/// A dense tensor in host memory: row-major, little-endian element bytes.
/// `bytes.size()` is numElements() × sizeOf(type) for a well-formed tensor;
/// the writers check that, the readers guarantee it. Elements of bool_
/// tensors are the bytes 0 and 1 only.
struct HostTensor {
  /// The tensor's name in a safetensors file; unused by the npy functions.
  std::string name;
  ElementType type = ElementType::f32;
  std::vector<int64_t> shape;
  TensorBytes bytes;

  /// The number of elements, or -1 when the shape is invalid (see
  /// checkedNumElements).
  int64_t numElements() const;

  /// The elements as T (see isStorageTypeOf). Returns an empty span when T
  /// is not the storage type of `type` or `bytes` has the wrong size.
  template <typename T> std::span<const T> values() const {
    if (!hasLayoutOf<T>())
      return {};
    return {reinterpret_cast<const T *>(bytes.data()),
            bytes.size() / sizeof(T)};
  }
  template <typename T> std::span<T> values() {
    if (!hasLayoutOf<T>())
      return {};
    return {reinterpret_cast<T *>(bytes.data()), bytes.size() / sizeof(T)};
  }

  /// A tensor holding a copy of `values`, which must have one element per
  /// element of `shape` and T must be the storage type of `type`.
  template <typename T>
  static HostTensor fromValues(std::string name, ElementType type,
                               std::vector<int64_t> shape,
                               std::span<const T> values) {
    assert(isStorageTypeOf<T>(type) && "T does not hold elements of type");
    HostTensor tensor{std::move(name), type, std::move(shape), {}};
    assert(static_cast<int64_t>(values.size()) == tensor.numElements() &&
           "value count does not match the shape");
    tensor.bytes.resize(values.size_bytes());
    if (!values.empty())
      std::memcpy(tensor.bytes.data(), values.data(), values.size_bytes());
    return tensor;
  }
  template <typename T>
  static HostTensor fromValues(std::string name, ElementType type,
                               std::vector<int64_t> shape,
                               const std::vector<T> &values) {
    return fromValues(std::move(name), type, std::move(shape),
                      std::span<const T>(values));
  }

  bool operator==(const HostTensor &other) const = default;

private:
  template <typename T> bool hasLayoutOf() const {
    // std::vector's storage comes from operator new, which is aligned for
    // every fundamental type, so only the element type and size need
    // checking.
    return isStorageTypeOf<T>(type) && numElements() >= 0 &&
           bytes.size() == static_cast<size_t>(numElements()) * sizeof(T);
  }
};

/// String-to-string metadata of a safetensors file (its "__metadata__").
using TensorMetadata = std::map<std::string, std::string>;

/// Reads the `.npy` file at `path` (format version 1.0, 2.0 or 3.0). The
/// dtype descr must be one of '<f4', '<f8', '<f2', '<i4', '<i8', '|u1' or
/// '|b1' (f32, f64, f16, i32, i64, u8, bool_); big-endian, complex, object
/// and structured dtypes are rejected. Arrays stored with fortran_order True
/// are transposed into row-major order on reading. The returned tensor's
/// name is empty.
llvm::Expected<HostTensor> readNpy(llvm::StringRef path);

/// Atomically writes `tensor` to `path` as a version 1.0 `.npy` file, byte
/// for byte what `numpy.save` writes for the same C-contiguous array
/// (version 2.0 only if the header would not fit in 1.0, as NumPy does).
/// bf16 tensors are rejected: NumPy has no bfloat16 dtype.
llvm::Error writeNpy(llvm::StringRef path, const HostTensor &tensor);

/// Reads the safetensors file at `path`. Returns the tensors in the order
/// their data appears in the file's buffer (ties between empty tensors,
/// which may share an offset, are broken by name); for files written by
/// writeSafetensors that is the order they were written in, except among
/// adjacent empty tensors. Stores the file's "__metadata__" in `*metadata`
/// when `metadata` is non-null (an empty map when the file has none).
///
/// Besides the format's own rules (the tensors tile the data buffer exactly,
/// each data_offsets range has shape × dtype size, names are unique), entries
/// must have exactly the keys "dtype", "shape" and "data_offsets", and the
/// dtype must be one of F32, F16, BF16, F64, I32, I64, U8 or BOOL.
llvm::Expected<std::vector<HostTensor>>
readSafetensors(llvm::StringRef path, TensorMetadata *metadata = nullptr);

/// Atomically writes `tensors` (in this order, packed without padding) and
/// `metadata` to `path` as a safetensors file. Names must be unique, valid
/// UTF-8 and not "__metadata__"; the header is padded with spaces to a
/// multiple of 8 bytes, as the reference implementation does, so that the
/// data buffer is 8-byte aligned in the file.
llvm::Error writeSafetensors(llvm::StringRef path,
                             llvm::ArrayRef<HostTensor> tensors,
                             const TensorMetadata &metadata = {});

/// Atomically writes `text` to `path`, as the tensor writers do.
llvm::Error writeTextFile(llvm::StringRef path, llvm::StringRef text);

/// Checks, before long work, that the atomic writers can write `path`: its
/// directory exists and is writable and `path` is not a directory. The
/// error names the path and the reason.
llvm::Error checkWritable(llvm::StringRef path);

/// Removes the temporary files that atomic writes of `path` left behind
/// when their process died (a crash or a kill mid-write); returns how many.
/// Every atomic write of `path` calls it first. A temporary is named
/// `<temporaryPrefix(path, pid)><random>`: it is stale when its process,
/// on this machine, is gone; one of another machine (a shared file
/// system) or without a writer's name when it is an hour old.
size_t removeStaleTemporaries(llvm::StringRef path);

/// The start of the names of the temporary files that process `pid` of
/// this machine uses for atomic writes of `path`:
/// `.<name>.tmp-<host>-<pid>-`.
std::string temporaryPrefix(llvm::StringRef path, int pid);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_TENSORFILE_H

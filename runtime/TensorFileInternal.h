//===- TensorFileInternal.h - what the file formats share -------*- C++ -*-===//
//
// Internal to the runtime: what the readers and writers of Npy.cpp and
// Safetensors.cpp take from TensorFile.cpp. The element types with their
// names in both formats, the messages of format errors, the checks of a
// tensor before it is written, and the file access: whole-file reads and
// atomic writes. Callers use TensorFile.h.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_TENSORFILEINTERNAL_H
#define SWITCHYARD_RUNTIME_TENSORFILEINTERNAL_H

#include "runtime/TensorFile.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <optional>
#include <string>

namespace switchyard::runtime::tensorfile {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// An element type, its size and its names in the runtime and the formats.
struct TypeInfo {
  ElementType type;
  const char *name;
  size_t size;
  /// The npy descr NumPy writes for this type; nullptr for bf16.
  const char *npyDescr;
  const char *safetensorsName;
};

inline constexpr TypeInfo kTypes[] = {
    {ElementType::f32, "f32", 4, "<f4", "F32"},
    {ElementType::f16, "f16", 2, "<f2", "F16"},
    {ElementType::bf16, "bf16", 2, nullptr, "BF16"},
    {ElementType::f64, "f64", 8, "<f8", "F64"},
    {ElementType::i32, "i32", 4, "<i4", "I32"},
    {ElementType::i64, "i64", 8, "<i8", "I64"},
    {ElementType::u8, "u8", 1, "|u1", "U8"},
    {ElementType::bool_, "bool", 1, "|b1", "BOOL"},
};

/// The entry of kTypes for `type`.
const TypeInfo &info(ElementType type);

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

/// An error `<path>: <message>` for malformed or unsupported content.
llvm::Error formatError(llvm::StringRef path, const llvm::Twine &message);

/// `bytes` with everything outside printable ASCII as \xNN and long inputs
/// cut short.
std::string printable(llvm::StringRef bytes, size_t limit = 40);

/// `bytes` in single quotes, made printable.
std::string quote(llvm::StringRef bytes, size_t limit = 40);

/// `shape` as "[2, 3]".
std::string formatShape(llvm::ArrayRef<int64_t> shape);

//===----------------------------------------------------------------------===//
// Validation shared by readers and writers
//===----------------------------------------------------------------------===//

/// The byte size of a tensor of `shape` and `type`, or std::nullopt when it
/// overflows int64_t (or the shape has a negative dimension).
std::optional<int64_t> checkedByteSize(llvm::ArrayRef<int64_t> shape,
                                       ElementType type);

/// The index of the first byte of a bool tensor that is neither 0 nor 1.
std::optional<size_t> findInvalidBool(llvm::StringRef bytes);

/// The error for the invalid bool byte `bytes[index]` of `what`.
llvm::Error invalidBoolError(llvm::StringRef path, const llvm::Twine &what,
                             llvm::StringRef bytes, size_t index);

/// Checks that `tensor` is consistent before it is written.
llvm::Error checkTensorForWriting(llvm::StringRef path,
                                  const HostTensor &tensor,
                                  const llvm::Twine &what);

//===----------------------------------------------------------------------===//
// File access
//===----------------------------------------------------------------------===//

/// The whole file at `path`.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readFile(llvm::StringRef path);

/// Writes the concatenation of `parts` to `requested` atomically: into a
/// fresh temporary file in the same directory, which is fsync'ed, closed and
/// renamed over the file. On failure the temporary is removed and the file
/// is left as it was. Temporaries that earlier writers of the file left
/// behind when they died are removed first. A symbolic link is followed; a
/// device or a pipe is written in place.
llvm::Error writeFileAtomically(llvm::StringRef requested,
                                llvm::ArrayRef<llvm::StringRef> parts);

} // namespace switchyard::runtime::tensorfile

#endif // SWITCHYARD_RUNTIME_TENSORFILEINTERNAL_H

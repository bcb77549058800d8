//===- TensorFile.cpp - element types, checks and file access -------------===//
//
// Implements the format-independent part of TensorFile.h: the element types
// and their names, the messages and checks that the npy (Npy.cpp) and
// safetensors (Safetensors.cpp) readers and writers share, and the file
// access. Files are read whole through llvm::MemoryBuffer (mmap'ed when
// large); they are written atomically, through a temporary file next to the
// target that is renamed over it, and the temporaries of writers that died
// are cleaned up.
//
//===----------------------------------------------------------------------===//

#include "runtime/TensorFile.h"
#include "runtime/TensorFileInternal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <unistd.h>

using namespace switchyard::runtime;
using namespace switchyard::runtime::tensorfile;
using llvm::ArrayRef;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

// Element bytes are copied between files and memory verbatim.
static_assert(std::endian::native == std::endian::little,
              "TensorFile assumes a little-endian host");

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

const TypeInfo &tensorfile::info(ElementType type) {
  for (const TypeInfo &entry : kTypes)
    if (entry.type == type)
      return entry;
  llvm_unreachable("unknown ElementType");
}

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

Error tensorfile::formatError(StringRef path, const Twine &message) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), path + ": " + message);
}

namespace {

/// An error `<path>: <message>: <reason>` for a failed system call.
Error ioError(StringRef path, const Twine &message, std::error_code ec) {
  return llvm::createStringError(ec,
                                 path + ": " + message + ": " + ec.message());
}

} // namespace

std::string tensorfile::printable(StringRef bytes, size_t limit) {
  std::string out;
  for (char c : bytes.take_front(limit)) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  if (bytes.size() > limit)
    out += "...";
  return out;
}

std::string tensorfile::quote(StringRef bytes, size_t limit) {
  return "'" + printable(bytes, limit) + "'";
}

std::string tensorfile::formatShape(ArrayRef<int64_t> shape) {
  std::string out = "[";
  for (auto [i, dim] : llvm::enumerate(shape))
    out += (i ? ", " : "") + std::to_string(dim);
  return out + "]";
}

//===----------------------------------------------------------------------===//
// Validation shared by readers and writers
//===----------------------------------------------------------------------===//

std::optional<int64_t> tensorfile::checkedByteSize(ArrayRef<int64_t> shape,
                                                   ElementType type) {
  std::optional<int64_t> count = checkedNumElements(shape);
  int64_t bytes;
  if (!count ||
      llvm::MulOverflow(*count, static_cast<int64_t>(sizeOf(type)), bytes))
    return std::nullopt;
  return bytes;
}

std::optional<size_t> tensorfile::findInvalidBool(StringRef bytes) {
  for (size_t i = 0; i < bytes.size(); ++i)
    if (static_cast<unsigned char>(bytes[i]) > 1)
      return i;
  return std::nullopt;
}

Error tensorfile::invalidBoolError(StringRef path, const Twine &what,
                                   StringRef bytes, size_t index) {
  return formatError(
      path, what + ": invalid bool value at element " + Twine(index) +
                " (expected 0 or 1, found " +
                Twine(unsigned(static_cast<unsigned char>(bytes[index]))) +
                ")");
}

Error tensorfile::checkTensorForWriting(StringRef path,
                                        const HostTensor &tensor,
                                        const Twine &what) {
  for (int64_t dim : tensor.shape)
    if (dim < 0)
      return formatError(path, what + ": invalid shape " +
                                   formatShape(tensor.shape) +
                                   " (expected non-negative dimensions, "
                                   "found " +
                                   Twine(dim) + ")");
  std::optional<int64_t> size = checkedByteSize(tensor.shape, tensor.type);
  if (!size)
    return formatError(path, what + ": element count of shape " +
                                 formatShape(tensor.shape) +
                                 " overflows int64");
  if (static_cast<uint64_t>(*size) != tensor.bytes.size())
    return formatError(path, what + ": byte size does not match shape " +
                                 formatShape(tensor.shape) + " and type " +
                                 toString(tensor.type) + " (expected " +
                                 Twine(*size) + " bytes, found " +
                                 Twine(tensor.bytes.size()) + ")");
  StringRef bytes(reinterpret_cast<const char *>(tensor.bytes.data()),
                  tensor.bytes.size());
  if (tensor.type == ElementType::bool_)
    if (std::optional<size_t> bad = findInvalidBool(bytes))
      return invalidBoolError(path, what, bytes, *bad);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// File access
//===----------------------------------------------------------------------===//

Expected<std::unique_ptr<llvm::MemoryBuffer>>
tensorfile::readFile(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return ioError(path, "cannot read file", buffer.getError());
  return std::move(*buffer);
}

namespace {

/// Writes all of `data` to `fd`, retrying short writes and EINTR.
std::error_code writeAll(int fd, StringRef data) {
  while (!data.empty()) {
    size_t chunk = std::min<size_t>(data.size(), size_t(1) << 30);
    ssize_t written = ::write(fd, data.data(), chunk);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return std::error_code(errno, std::generic_category());
    }
    data = data.drop_front(static_cast<size_t>(written));
  }
  return {};
}

/// The prefix of the temporary files that atomic writes of `path` use:
/// a hidden sibling, `.<name>.tmp-`, followed by the writer's process id,
/// a dash and random characters. '%' in the name would be taken for a
/// placeholder, so it is replaced.
std::string temporaryPrefix(StringRef path) {
  std::string stem = llvm::sys::path::filename(path).str();
  std::replace(stem.begin(), stem.end(), '%', '_');
  return "." + stem + ".tmp-";
}

/// This machine's name as temporary names carry it: letters, digits, '.'
/// and '_' ('-' separates the fields).
const std::string &hostTag() {
  static const std::string tag = [] {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || !name[0])
      return std::string("host");
    std::string text(name);
    for (char &c : text)
      if (!llvm::isAlnum(c) && c != '.')
        c = '_';
    return text;
  }();
  return tag;
}

/// The model of a temporary file for an atomic write of `path`:
/// `.<name>.tmp-<host>-<pid>-<random>`, so that a later writer can tell
/// the temporaries of dead processes on this machine.
llvm::SmallString<256> temporaryModel(StringRef path) {
  llvm::SmallString<256> model(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(
      model, switchyard::runtime::temporaryPrefix(path, ::getpid()) +
                 "%%%%%%%%");
  return model;
}

/// Where a write of `path` goes, and how. A symbolic link is followed (the
/// link is kept, its target written). A device or a pipe (/dev/null,
/// /dev/stdout to a terminal or a pipe) is written in place: renaming over
/// it would replace it. Regular files and new names are written atomically.
struct WriteTarget {
  std::string path;
  bool inPlace = false;
};
WriteTarget writeTarget(StringRef path) {
  WriteTarget target{path.str(), false};
  llvm::sys::fs::file_status link;
  if (!llvm::sys::fs::status(path, link, /*Follow=*/false) &&
      link.type() == llvm::sys::fs::file_type::symlink_file) {
    llvm::SmallString<256> real;
    // An anonymous pipe (/proc/self/fd/1 -> pipe:[...]) has no path.
    if (llvm::sys::fs::real_path(path, real)) {
      target.inPlace = true;
      return target;
    }
    target.path = std::string(real);
  }
  llvm::sys::fs::file_status status;
  target.inPlace = !llvm::sys::fs::status(target.path, status) &&
                   llvm::sys::fs::exists(status) &&
                   !llvm::sys::fs::is_regular_file(status) &&
                   !llvm::sys::fs::is_directory(status);
  return target;
}

} // namespace

Error tensorfile::writeFileAtomically(StringRef requested,
                                      ArrayRef<StringRef> parts) {
  WriteTarget target = writeTarget(requested);
  StringRef path = target.path;
  if (target.inPlace) {
    int fd = ::open(target.path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return ioError(requested, "cannot open it for writing",
                     std::error_code(errno, std::generic_category()));
    for (StringRef part : parts)
      if (std::error_code ec = writeAll(fd, part)) {
        ::close(fd);
        return ioError(requested, "cannot write it", ec);
      }
    if (::close(fd) != 0)
      return ioError(requested, "cannot close it",
                     std::error_code(errno, std::generic_category()));
    return Error::success();
  }
  removeStaleTemporaries(path);
  StringRef directory = llvm::sys::path::parent_path(path);
  llvm::SmallString<256> model = temporaryModel(path);

  int fd = -1;
  llvm::SmallString<256> tempPath;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, tempPath))
    return ioError(path, "cannot create a temporary file next to it", ec);

  auto fail = [&](const Twine &message, std::error_code ec) {
    if (fd >= 0)
      ::close(fd);
    llvm::sys::fs::remove(tempPath);
    return ioError(path, message, ec);
  };
  auto lastError = [] {
    return std::error_code(errno, std::generic_category());
  };

  for (StringRef part : parts)
    if (std::error_code ec = writeAll(fd, part))
      return fail(Twine("cannot write temporary file ") + tempPath, ec);
  if (::fsync(fd) != 0)
    return fail(Twine("cannot flush temporary file ") + tempPath, lastError());
  int closeResult = ::close(fd);
  fd = -1;
  if (closeResult != 0)
    return fail(Twine("cannot close temporary file ") + tempPath, lastError());
  if (std::error_code ec = llvm::sys::fs::rename(tempPath, path))
    return fail(Twine("cannot rename temporary file ") + tempPath + " to it",
                ec);

  // Persist the rename itself. Best effort: the data is complete either way.
  std::string dirPath = directory.empty() ? "." : directory.str();
  int dirFd = ::open(dirPath.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

std::string_view switchyard::runtime::toString(ElementType type) {
  return info(type).name;
}

size_t switchyard::runtime::sizeOf(ElementType type) { return info(type).size; }

std::optional<DType> switchyard::runtime::toDType(ElementType type) {
  switch (type) {
  case ElementType::f32:
    return DType::f32;
  case ElementType::f16:
    return DType::f16;
  case ElementType::bf16:
    return DType::bf16;
  default:
    return std::nullopt;
  }
}

ElementType switchyard::runtime::toElementType(DType type) {
  switch (type) {
  case DType::f32:
    return ElementType::f32;
  case DType::f16:
    return ElementType::f16;
  case DType::bf16:
    return ElementType::bf16;
  }
  llvm_unreachable("unknown DType");
}

std::optional<int64_t>
switchyard::runtime::checkedNumElements(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    if (dim < 0 || llvm::MulOverflow(count, dim, count))
      return std::nullopt;
  return count;
}

int64_t HostTensor::numElements() const {
  return checkedNumElements(shape).value_or(-1);
}

size_t switchyard::runtime::removeStaleTemporaries(StringRef path) {
  StringRef directory = llvm::sys::path::parent_path(path);
  std::string prefix = ::temporaryPrefix(path);
  std::error_code ec;
  size_t removed = 0;
  auto now = std::chrono::system_clock::now();
  for (llvm::sys::fs::directory_iterator it(directory.empty() ? "." : directory,
                                            ec),
       end;
       !ec && it != end; it.increment(ec)) {
    StringRef name = llvm::sys::path::filename(it->path());
    if (!name.consume_front(prefix))
      continue;
    // `<host>-<pid>-<random>`: stale when that process of this machine is
    // gone. Other machines' (a shared file system) and names without a
    // writer (earlier versions) are stale when an hour old: a writer in
    // progress keeps its file's time current.
    llvm::SmallVector<StringRef, 3> fields;
    name.split(fields, '-');
    int pid = 0;
    bool stale;
    if (fields.size() == 3 && fields[0] == hostTag() &&
        !fields[1].getAsInteger(10, pid) && pid > 0) {
      stale = ::kill(pid, 0) != 0 && errno == ESRCH;
    } else {
      llvm::sys::fs::file_status status;
      stale = !llvm::sys::fs::status(it->path(), status) &&
              now - status.getLastModificationTime() > std::chrono::hours(1);
    }
    if (stale && !llvm::sys::fs::remove(it->path()))
      ++removed;
  }
  return removed;
}

Error switchyard::runtime::checkWritable(StringRef path) {
  if (path.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "an empty output path");
  if (llvm::sys::fs::is_directory(path))
    return llvm::createStringError(
        std::make_error_code(std::errc::is_a_directory),
        path + ": cannot write the file: it is a directory");
  // A device or a pipe is written in place (writeFileAtomically).
  WriteTarget target = writeTarget(path);
  if (target.inPlace) {
    if (::access(target.path.c_str(), W_OK) != 0)
      return ioError(path, "cannot write it",
                     std::error_code(errno, std::generic_category()));
    return Error::success();
  }
  StringRef directory = llvm::sys::path::parent_path(target.path);
  std::string dir = directory.empty() ? "." : directory.str();
  if (!llvm::sys::fs::is_directory(dir))
    return llvm::createStringError(
        std::make_error_code(std::errc::no_such_file_or_directory),
        path + ": cannot write the file: directory '" + dir +
            "' does not exist");
  // Creating a file is the test that holds for every user, root included,
  // and every file system (read-only mounts, /proc).
  int fd = -1;
  llvm::SmallString<256> probe;
  llvm::SmallString<256> model = temporaryModel(target.path);
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(model, fd, probe))
    return ioError(path,
                   "cannot write the file: cannot create a file in '" + dir +
                       "'",
                   ec);
  ::close(fd);
  llvm::sys::fs::remove(probe);
  return Error::success();
}

Error switchyard::runtime::writeTextFile(StringRef path, StringRef text) {
  return writeFileAtomically(path, {text});
}

std::string switchyard::runtime::temporaryPrefix(StringRef path, int pid) {
  return ::temporaryPrefix(path) + hostTag() + "-" + std::to_string(pid) +
         "-";
}

//===----------------------------------------------------------------------===//
// TensorBytes
//===----------------------------------------------------------------------===//

TensorBytes::~TensorBytes() { switchyardBufferFree(block); }

TensorBytes TensorBytes::adopt(void *block, uint8_t *first, size_t count) {
  TensorBytes bytes;
  bytes.block = block;
  bytes.first = first;
  bytes.count = bytes.capacity = count;
  return bytes;
}

void TensorBytes::resize(size_t newCount) {
  if (newCount <= capacity) {
    count = newCount;
    return;
  }
  void *grown = switchyardBufferAlloc(newCount);
  if (!grown)
    llvm::report_fatal_error("out of memory allocating a tensor of " +
                             llvm::Twine(newCount) + " bytes");
  if (count)
    std::memcpy(grown, first, count);
  switchyardBufferFree(block);
  block = grown;
  first = static_cast<uint8_t *>(grown);
  count = capacity = newCount;
}

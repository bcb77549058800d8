//===- Nccl.cpp - NCCL behind dlopen --------------------------------------===//
//
// The few NCCL functions data-parallel training needs, through dlsym, with
// nccl.h's types written out: a communicator is an opaque pointer, the
// unique id 128 bytes passed by value, data types and reduction operations
// small integers (ncclFloat32 = 7, ncclAvg = 4, stable since NCCL 2.10).
//
//===----------------------------------------------------------------------===//

#include "runtime/Nccl.h"

#include "runtime/Distributed.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <span>

using namespace switchyard::runtime;

namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// nccl.h's ncclUniqueId.
struct UniqueId {
  char internal[128];
};

using Comm = void *;
using Result = int;
constexpr int kFloat32 = 7;
constexpr int kAvg = 4;
/// ncclAvg exists from NCCL 2.10 on.
constexpr int kOldestVersion = 21000;

/// The library's functions, loaded once per process.
struct Library {
  Result (*getVersion)(int *) = nullptr;
  Result (*getUniqueId)(UniqueId *) = nullptr;
  Result (*commInitRank)(Comm *, int, UniqueId, int) = nullptr;
  Result (*commDestroy)(Comm) = nullptr;
  Result (*allReduce)(const void *, void *, size_t, int, int, Comm,
                      void *) = nullptr;
  Result (*groupStart)() = nullptr;
  Result (*groupEnd)() = nullptr;
  const char *(*errorString)(Result) = nullptr;
  int version = 0;

  static llvm::Expected<Library &> get() {
    static Library library;
    static std::string error = library.open();
    if (!error.empty())
      return failure(error);
    return library;
  }

  /// NCCL's words for a failed call.
  llvm::Error check(Result result, const llvm::Twine &what) const {
    if (result == 0)
      return llvm::Error::success();
    return failure(llvm::formatv("NCCL: {0} failed: {1} (error {2})", what,
                                 errorString ? errorString(result) : "?",
                                 result));
  }

private:
  std::string open() {
    const char *override = std::getenv("SWITCHYARD_NCCL_LIBRARY");
    std::string path = override && *override ? override : "libnccl.so.2";
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      return llvm::formatv("cannot load NCCL ({0}: {1}); install it (NVIDIA's "
                           "libnccl2, or the nvidia-nccl wheel) or name its "
                           "libnccl.so.2 in SWITCHYARD_NCCL_LIBRARY",
                           path, dlerror())
          .str();
    auto find = [&](const char *name, auto &slot) -> bool {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(
          dlsym(handle, name));
      return slot != nullptr;
    };
    if (!find("ncclGetVersion", getVersion) ||
        !find("ncclGetUniqueId", getUniqueId) ||
        !find("ncclCommInitRank", commInitRank) ||
        !find("ncclCommDestroy", commDestroy) ||
        !find("ncclAllReduce", allReduce) ||
        !find("ncclGroupStart", groupStart) ||
        !find("ncclGroupEnd", groupEnd) ||
        !find("ncclGetErrorString", errorString))
      return path + " is not NCCL's library (a function is missing)";
    if (getVersion(&version) != 0)
      return "NCCL: ncclGetVersion failed";
    if (version < kOldestVersion)
      return llvm::formatv("NCCL {0} is too old: averaging (ncclAvg) needs "
                           "2.10 or later",
                           version)
          .str();
    return "";
  }
};

/// NCCL_VERSION_CODE as "2.27.7".
std::string versionText(int code) {
  return llvm::formatv("{0}.{1}.{2}", code / 10000, code / 100 % 100,
                       code % 100)
      .str();
}

} // namespace

struct NcclGroup::Impl {
  Library *library = nullptr;
  Comm comm = nullptr;
  int rank = 0, size = 1;
};

NcclGroup::NcclGroup(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}

NcclGroup::~NcclGroup() {
  if (impl->comm)
    impl->library->commDestroy(impl->comm);
}

llvm::Expected<std::unique_ptr<NcclGroup>>
NcclGroup::create(Communicator *ranks) {
  llvm::Expected<Library &> library = Library::get();
  if (!library)
    return library.takeError();
  auto impl = std::make_unique<Impl>();
  impl->library = &*library;
  impl->rank = ranks ? ranks->rank() : 0;
  impl->size = ranks ? ranks->size() : 1;
  // Rank 0's id, given to the others.
  UniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (impl->rank == 0)
    if (llvm::Error error =
            library->check(library->getUniqueId(&id), "ncclGetUniqueId"))
      return std::move(error);
  if (ranks && impl->size > 1)
    if (llvm::Error error = ranks->broadcast(
            std::span<char>(id.internal, sizeof(id.internal)), 0))
      return std::move(error);
  if (llvm::Error error = library->check(
          library->commInitRank(&impl->comm, impl->size, id, impl->rank),
          llvm::formatv("ncclCommInitRank (rank {0} of {1})", impl->rank,
                        impl->size)))
    return std::move(error);
  return std::unique_ptr<NcclGroup>(new NcclGroup(std::move(impl)));
}

int NcclGroup::rank() const { return impl->rank; }
int NcclGroup::size() const { return impl->size; }

llvm::Error NcclGroup::allReduceMean(llvm::ArrayRef<DeviceFloats> buffers,
                                     void *stream) {
  const Library &library = *impl->library;
  if (llvm::Error error = library.check(library.groupStart(), "ncclGroupStart"))
    return error;
  llvm::Error failed = llvm::Error::success();
  for (const DeviceFloats &buffer : buffers) {
    void *data = reinterpret_cast<void *>(buffer.address);
    failed = library.check(
        library.allReduce(data, data, buffer.count, kFloat32, kAvg, impl->comm,
                          stream),
        llvm::formatv("ncclAllReduce of {0} values", buffer.count));
    if (failed)
      break;
  }
  // The group ends whatever happened inside it.
  llvm::Error ended = library.check(library.groupEnd(), "ncclGroupEnd");
  if (failed) {
    llvm::consumeError(std::move(ended));
    return failed;
  }
  return ended;
}

std::string NcclGroup::describe() const {
  return llvm::formatv("NCCL {0}, {1} rank{2}",
                       versionText(impl->library->version), impl->size,
                       impl->size == 1 ? "" : "s")
      .str();
}

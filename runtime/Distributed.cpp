//===- Distributed.cpp - MPI's world behind dlopen ------------------------===//
//
// The few MPI functions data-parallel training needs, from Open MPI's
// libmpi.so.40 through dlsym. Open MPI's handles (MPI_COMM_WORLD,
// MPI_FLOAT, MPI_BYTE, MPI_SUM) are the addresses of its predefined objects,
// which dlsym finds by their names; MPI_IN_PLACE is the address 1. No MPI
// header is needed to build, and a process that no launcher started never loads
// the library.
//
//===----------------------------------------------------------------------===//

#include "runtime/Distributed.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>
#include <dlfcn.h>
#include <limits>
#include <memory>

using namespace switchyard::runtime;

Communicator::~Communicator() = default;

namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Open MPI's handles are pointers to its objects.
using Handle = void *;

class MpiWorld final : public Communicator {
public:
  static llvm::Expected<std::unique_ptr<MpiWorld>> create();
  ~MpiWorld() override {
    if (finalize)
      finalize();
  }

  int rank() const override { return myRank; }
  int size() const override { return worldSize; }

  llvm::Error allReduceSum(std::span<float> values) override {
    return sum(values, floatType);
  }
  llvm::Error allReduceSum(std::span<double> values) override {
    return sum(values, doubleType);
  }

  llvm::Error broadcast(std::span<char> bytes, int root) override {
    if (bytes.size() > size_t(std::numeric_limits<int>::max()))
      return failure("MPI_Bcast of more than 2^31 bytes");
    if (int code =
            bcast(bytes.data(), int(bytes.size()), byteType, root, world))
      return failure(
          llvm::formatv("MPI_Bcast of {0} bytes failed (error {1}) on rank {2}",
                        bytes.size(), code, myRank));
    return llvm::Error::success();
  }

  [[noreturn]] void abort(int code) override {
    abortAll(world, code);
    std::_Exit(code);
  }

  std::string describe() const override {
    return llvm::formatv("{0} ranks, {1}", worldSize, version).str();
  }

private:
  static inline const Handle kInPlace = reinterpret_cast<Handle>(1);

  template <typename T> llvm::Error sum(std::span<T> values, Handle type) {
    // MPI counts are ints: large vectors go in parts.
    constexpr size_t kPart = size_t(std::numeric_limits<int>::max());
    for (size_t first = 0; first < values.size(); first += kPart) {
      int count = int(std::min(kPart, values.size() - first));
      if (int code = allreduce(kInPlace, values.data() + first, count, type,
                               sumOp, world))
        return failure(llvm::formatv(
            "MPI_Allreduce of {0} values failed (error {1}) on rank {2}", count,
            code, myRank));
    }
    return llvm::Error::success();
  }

  int (*init)(int *, char ***) = nullptr;
  int (*finalize)() = nullptr;
  int (*commRank)(Handle, int *) = nullptr;
  int (*commSize)(Handle, int *) = nullptr;
  int (*allreduce)(const void *, void *, int, Handle, Handle, Handle) = nullptr;
  int (*bcast)(void *, int, Handle, int, Handle) = nullptr;
  int (*abortAll)(Handle, int) = nullptr;
  int (*libraryVersion)(char *, int *) = nullptr;
  Handle world = nullptr, floatType = nullptr, doubleType = nullptr,
         byteType = nullptr, sumOp = nullptr;
  int myRank = 0, worldSize = 1;
  std::string version;
};

llvm::Expected<std::unique_ptr<MpiWorld>> MpiWorld::create() {
  const char *override = std::getenv("SWITCHYARD_MPI_LIBRARY");
  std::string path = override && *override ? override : "libmpi.so.40";
  // Global: Open MPI's components, which it loads itself, resolve their
  // symbols against the library.
  void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!library)
    return failure(llvm::formatv(
        "cannot load the MPI library {0} ({1}); install Open MPI "
        "(openmpi-bin) or name the library in SWITCHYARD_MPI_LIBRARY",
        path, dlerror()));
  auto world = std::make_unique<MpiWorld>();
  auto find = [&](const char *name, auto &slot) -> bool {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(
        dlsym(library, name));
    return slot != nullptr;
  };
  void *comm = nullptr, *type = nullptr, *wide = nullptr, *byte = nullptr,
       *op = nullptr;
  if (!find("MPI_Init", world->init) ||
      !find("MPI_Finalize", world->finalize) ||
      !find("MPI_Comm_rank", world->commRank) ||
      !find("MPI_Comm_size", world->commSize) ||
      !find("MPI_Allreduce", world->allreduce) ||
      !find("MPI_Bcast", world->bcast) || !find("MPI_Abort", world->abortAll) ||
      !find("MPI_Get_library_version", world->libraryVersion) ||
      !find("ompi_mpi_comm_world", comm) || !find("ompi_mpi_float", type) ||
      !find("ompi_mpi_double", wide) || !find("ompi_mpi_byte", byte) ||
      !find("ompi_mpi_op_sum", op)) {
    world->finalize = nullptr;
    return failure(path + " is not Open MPI's library (a function or "
                          "predefined object is missing)");
  }
  world->world = comm;
  world->floatType = type;
  world->doubleType = wide;
  world->byteType = byte;
  world->sumOp = op;
  if (int code = world->init(nullptr, nullptr)) {
    world->finalize = nullptr;
    return failure(llvm::formatv("MPI_Init failed (error {0})", code));
  }
  world->commRank(comm, &world->myRank);
  world->commSize(comm, &world->worldSize);
  char text[4096] = {};
  int length = 0;
  world->libraryVersion(text, &length);
  world->version =
      llvm::StringRef(text, size_t(length)).split('\n').first.str();
  world->version =
      llvm::StringRef(world->version).split(',').first.trim().str();
  return world;
}

} // namespace

bool switchyard::runtime::launchedByMpi() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (const char *value = std::getenv(name); value && *value)
      return true;
  return false;
}

llvm::Expected<Communicator *> switchyard::runtime::mpiWorld() {
  static std::unique_ptr<MpiWorld> world;
  if (world)
    return world.get();
  llvm::Expected<std::unique_ptr<MpiWorld>> created = MpiWorld::create();
  if (!created)
    return created.takeError();
  world = std::move(*created);
  return world.get();
}

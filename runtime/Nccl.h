//===- Nccl.h - the ranks' GPUs averaging device memory ---------*- C++ -*-===//
//
// Data-parallel training on GPUs: an NcclGroup is the GPUs of a run's ranks
// (one per process) as one NCCL communicator, and averages buffers in
// device memory across them, so that gradients never leave the GPU. NCCL
// is loaded at run time (as the CUDA driver is): libnccl.so.2 with dlopen,
// or the file $SWITCHYARD_NCCL_LIBRARY names (say, the one in PyTorch's
// nvidia-nccl wheel); nothing links against it and no NCCL header is
// needed to build.
//
// The ranks agree on NCCL's unique id through their MPI communicator (rank
// 0 makes it, a broadcast gives it to the others); a group of one rank
// needs none. Each process uses its CUDA device 0: on a machine with
// several GPUs, give each rank its own (CUDA_VISIBLE_DEVICES; the README's
// "Training on several processes").
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_NCCL_H
#define SWITCHYARD_RUNTIME_NCCL_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>

namespace switchyard::runtime {

class Communicator;

/// A buffer of f32 values in device memory.
struct DeviceFloats {
  uint64_t address = 0;
  size_t count = 0;
};

class NcclGroup {
public:
  /// The GPUs of `ranks` (every rank calls this, in the same order of
  /// calls), or of this process alone where `ranks` is null. Loads NCCL on
  /// the first call; an error where it cannot be loaded or initialised.
  static llvm::Expected<std::unique_ptr<NcclGroup>> create(Communicator *ranks);

  ~NcclGroup();
  NcclGroup(const NcclGroup &) = delete;
  NcclGroup &operator=(const NcclGroup &) = delete;

  int rank() const;
  int size() const;

  /// Replaces each buffer by its element-wise mean over the ranks (NCCL's
  /// all-reduce with ncclAvg, in place), all of them in one group of calls
  /// on `stream` (a CUstream; the device's work before it on that stream
  /// comes first). Returns once they are queued: synchronise the stream
  /// before reading them on the host.
  llvm::Error allReduceMean(llvm::ArrayRef<DeviceFloats> buffers, void *stream);

  /// "NCCL 2.27.7, 2 ranks", for messages.
  std::string describe() const;

  struct Impl;

private:
  explicit NcclGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_NCCL_H

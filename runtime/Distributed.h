//===- Distributed.h - processes that train one model together -*- C++ -*-===//
//
// Data-parallel training across processes: a Communicator is the group of
// processes (ranks) a run was started as, and sums vectors across them.
// The one implementation is MPI's world: Open MPI's libmpi.so.40, loaded at
// run time (as the CUDA driver is), so that nothing is linked against MPI
// and a process that no MPI launcher started never loads it. Start a run
// with `mpirun -np N switchyard train ...`; $SWITCHYARD_MPI_LIBRARY names
// another library file of Open MPI's ABI.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_DISTRIBUTED_H
#define SWITCHYARD_RUNTIME_DISTRIBUTED_H

#include "llvm/Support/Error.h"

#include <span>
#include <string>

namespace switchyard::runtime {

/// The ranks of a run, each a process.
class Communicator {
public:
  virtual ~Communicator();

  /// This process's rank in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Replaces `values` on every rank by the element-wise sum over the ranks
  /// (the same on all of them). Every rank calls it with as many values, in
  /// the same order of calls.
  virtual llvm::Error allReduceSum(std::span<float> values) = 0;
  virtual llvm::Error allReduceSum(std::span<double> values) = 0;
  /// Replaces `bytes` on every rank by rank `root`'s.
  virtual llvm::Error broadcast(std::span<char> bytes, int root) = 0;

  /// Ends every rank of the run after an error on this one, so that the
  /// others do not wait for it forever.
  [[noreturn]] virtual void abort(int code) = 0;

  /// The library and the number of ranks, for messages.
  virtual std::string describe() const = 0;
};

/// Whether an MPI launcher started this process (Open MPI's mpirun, or a
/// PMIx launcher): its environment names the run's size.
bool launchedByMpi();

/// The ranks of this MPI run: the library loaded and MPI initialised on
/// the first call, finalised at exit. An error where the library cannot be
/// loaded or initialised.
llvm::Expected<Communicator *> mpiWorld();

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_DISTRIBUTED_H

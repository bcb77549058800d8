//===- CallGraphs.h - GPU calls replayed as CUDA graphs ---------*- C++ -*-===//
//
// A training step launches hundreds of kernels, each a trip through the
// driver on the host. Where a call's temporaries come from a memory plan
// (runtime/MemoryPlan.h: the same addresses on every call of a function
// with given argument shapes), its whole launch sequence can be recorded
// once as a CUDA graph (stream capture) and replayed with one launch, as
// PyTorch's CUDA graphs and TensorRT do: the host code does not run again.
//
// A graph reads and writes fixed addresses, so a GpuProgram's CallGraphs
// gives each kind of call (its plan's key):
// - input buffers of its own, one per argument, into which every call
//   copies its arguments (host tensors and device handles alike) before
//   the replay;
// - up to kGraphsPerCall graphs, each with the output buffers it writes
//   (the allocations that escaped the captured call: its results). A
//   result the caller keeps on the device is lent from them (a handle that
//   does not free its memory); a graph is replayed only when none of its
//   outputs is lent, so that a handle's contents never change under it. A
//   training loop, which keeps step n's parameters until step n + 1 has
//   made the next ones, alternates between two graphs.
// A call that finds no plan yet (the first, which records it), a plan
// whose arena changed since the capture, or every graph's outputs lent
// with no room for another, runs the host code as usual. A capture that
// fails (an operation a capture cannot take, the plan not replayed
// cleanly, a deferred driver error) ran nothing: the call then runs as
// usual too, and after kMaxFailures failures the kind of call is not
// captured again.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_ENGINE_CALLGRAPHS_H
#define SWITCHYARD_RUNTIME_ENGINE_CALLGRAPHS_H

#include "runtime/CudaDriver.h"
#include "runtime/Engine/ProgramSupport.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace switchyard::runtime {

/// Whether GPU calls are replayed as CUDA graphs: SWITCHYARD_CUDA_GRAPHS=1
/// in the environment (and no kernel profile, which times launches one by
/// one). Graphs need memory plans: with graphs on, calls are planned.
bool cudaGraphsEnabled();

/// The output buffers of one graph (from the driver's pool), returned
/// there when the graph and every handle lent from them are gone.
struct GraphOutputs {
  std::vector<cuda::DevicePtr> buffers;
  ~GraphOutputs();
};

class CallGraphs {
public:
  /// Graphs per kind of call.
  static constexpr size_t kGraphsPerCall = 2;
  /// Failed captures after which a kind of call is no longer captured.
  static constexpr size_t kMaxFailures = 2;

  /// One argument: a device buffer or host bytes, `bytes` long.
  struct Argument {
    cuda::DevicePtr device = 0;
    const void *host = nullptr;
    uint64_t bytes = 0;
    std::vector<int64_t> shape;
  };
  /// Runs the host code on argument descriptors, as detail::invoke.
  using Invoke =
      llvm::function_ref<llvm::Expected<std::vector<detail::ResultDescriptor>>(
          std::vector<std::vector<int64_t>> &descriptors)>;
  /// A replayed call: its results (views of `outputs`' buffers, or of the
  /// inputs where a function returns an argument) and the buffers'
  /// owner, which lends them to handles.
  struct Replayed {
    std::vector<detail::ResultDescriptor> results;
    std::shared_ptr<GraphOutputs> outputs;
  };

  CallGraphs() = default;
  ~CallGraphs();
  CallGraphs(const CallGraphs &) = delete;
  CallGraphs &operator=(const CallGraphs &) = delete;

  /// The call of plan `key` on `stream` by a graph (captured first where
  /// there is none free), the arguments copied into the inputs on
  /// `stream` first; nullopt where it runs as usual instead (nothing was
  /// run). An error is the call's: a copy or a replay the driver refused.
  std::optional<llvm::Expected<Replayed>>
  call(cuda::Driver &driver, const std::string &key,
       llvm::ArrayRef<Argument> arguments, cuda::Stream stream, Invoke invoke);

  /// Destroys every graph (before the kernels' modules are unloaded) and
  /// returns the inputs to the pool; lent outputs stay with their handles.
  void clear();

  /// Graphs captured and replays so far, over every kind of call.
  size_t captures() const { return captured; }
  size_t replays() const { return replayed; }

private:
  struct Graph {
    cuda::GraphExec exec = nullptr;
    std::vector<detail::ResultDescriptor> results;
    std::shared_ptr<GraphOutputs> outputs;
    /// Whether no handle holds one of its outputs.
    bool free() const { return outputs.use_count() == 1; }
  };
  struct Kind {
    /// The plan's arena when the graphs were captured.
    uint64_t arena = 0;
    std::vector<cuda::DevicePtr> inputs;
    std::vector<Graph> graphs;
    size_t failures = 0;
  };

  /// Forgets `kind`'s graphs and inputs.
  void clear(cuda::Driver &driver, Kind &kind);
  /// Captures a graph of the call into `kind`; null where the capture
  /// failed (the failure counted).
  Graph *capture(cuda::Driver &driver, Kind &kind, const std::string &key,
                 llvm::ArrayRef<Argument> arguments, cuda::Stream stream,
                 Invoke invoke);

  std::map<std::string, Kind> kinds;
  cuda::Driver *owner = nullptr;
  size_t captured = 0, replayed = 0;
};

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_ENGINE_CALLGRAPHS_H

//===- CallGraphs.cpp - GPU calls replayed as CUDA graphs -----------------===//

#include "runtime/Engine/CallGraphs.h"

#include <cstdlib>
#include <set>

using namespace switchyard::runtime;
using llvm::Expected;

bool switchyard::runtime::cudaGraphsEnabled() {
  const char *value = std::getenv("SWITCHYARD_CUDA_GRAPHS");
  return value && llvm::StringRef(value) == "1" && !cuda::kernelProfiling();
}

GraphOutputs::~GraphOutputs() {
  if (buffers.empty())
    return;
  if (Expected<cuda::Driver &> driver = cuda::Driver::get())
    for (cuda::DevicePtr buffer : buffers)
      driver->release(buffer);
  else
    llvm::consumeError(driver.takeError());
}

CallGraphs::~CallGraphs() { clear(); }

void CallGraphs::clear() {
  if (owner)
    for (auto &[key, kind] : kinds)
      clear(*owner, kind);
  kinds.clear();
}

void CallGraphs::clear(cuda::Driver &driver, Kind &kind) {
  // The graphs' outputs stay while a handle holds them (GraphOutputs).
  for (Graph &graph : kind.graphs)
    driver.destroyGraph(graph.exec);
  kind.graphs.clear();
  for (cuda::DevicePtr input : kind.inputs)
    driver.release(input);
  kind.inputs.clear();
}

CallGraphs::Graph *CallGraphs::capture(cuda::Driver &driver, Kind &kind,
                                       const std::string &key,
                                       llvm::ArrayRef<Argument> arguments,
                                       cuda::Stream stream, Invoke invoke) {
  const MemoryPlan *plan = driver.memoryPlan(key);
  size_t cleanBefore = plan->replayedCalls();
  uint64_t arena = plan->arenaAddress();
  std::vector<std::vector<int64_t>> descriptors;
  for (auto [input, argument] : llvm::zip_equal(kind.inputs, arguments))
    descriptors.push_back(detail::denseDescriptor(
        reinterpret_cast<const void *>(input), argument.shape));

  // Nothing runs while the stream captures: the generated code's streams
  // are the capturing one, its allocations the plan's.
  llvm::consumeError(cuda::takeDeferredError());
  if (llvm::Error error = driver.beginCapture(stream)) {
    llvm::consumeError(std::move(error));
    ++kind.failures;
    return nullptr;
  }
  driver.beginPlannedCall(key);
  driver.beginCapturedCall(stream);
  Expected<std::vector<detail::ResultDescriptor>> results = invoke(descriptors);
  driver.endCapturedCall();
  driver.endPlannedCall();
  Expected<cuda::GraphExec> exec = driver.endCapture(stream);
  llvm::Error deferred = cuda::takeDeferredError();

  // The results' buffers that the call allocated are the graph's outputs;
  // a result that is an input stays the inputs'.
  std::set<cuda::DevicePtr> inputs(kind.inputs.begin(), kind.inputs.end());
  auto outputs = std::make_shared<GraphOutputs>();
  if (results)
    for (const detail::ResultDescriptor &result : *results) {
      auto buffer = reinterpret_cast<cuda::DevicePtr>(result.allocated);
      if (buffer && !inputs.count(buffer) &&
          llvm::find(outputs->buffers, buffer) == outputs->buffers.end())
        outputs->buffers.push_back(buffer);
    }
  // Replayable only if every temporary came from the arena, which is still
  // the one the graph captured.
  bool clean = plan->replayedCalls() == cleanBefore + 1 && plan->planned() &&
               plan->arenaAddress() == arena;
  if (!results || !exec || deferred || !clean) {
    if (!results)
      llvm::consumeError(results.takeError());
    if (exec)
      driver.destroyGraph(*exec);
    else
      llvm::consumeError(exec.takeError());
    llvm::consumeError(std::move(deferred));
    ++kind.failures;
    return nullptr;
  }
  ++captured;
  kind.graphs.push_back(Graph{*exec, std::move(*results), std::move(outputs)});
  return &kind.graphs.back();
}

std::optional<Expected<CallGraphs::Replayed>>
CallGraphs::call(cuda::Driver &driver, const std::string &key,
                 llvm::ArrayRef<Argument> arguments, cuda::Stream stream,
                 Invoke invoke) {
  owner = &driver;
  const MemoryPlan *plan = driver.memoryPlan(key);
  if (!plan || !plan->planned())
    return std::nullopt;
  Kind &kind = kinds[key];
  if (kind.arena != plan->arenaAddress()) {
    // A new arena (the plan was made again): the graphs wrote the old one.
    clear(driver, kind);
    kind.arena = plan->arenaAddress();
  }
  Graph *graph = nullptr;
  for (Graph &candidate : kind.graphs)
    if (candidate.free()) {
      graph = &candidate;
      break;
    }
  bool capturing = !graph;
  if (capturing &&
      (kind.graphs.size() >= kGraphsPerCall || kind.failures >= kMaxFailures))
    return std::nullopt;

  if (kind.inputs.empty())
    for (const Argument &argument : arguments) {
      Expected<cuda::DevicePtr> input =
          driver.allocate(std::max<uint64_t>(argument.bytes, 1));
      if (!input)
        return Expected<Replayed>(input.takeError());
      kind.inputs.push_back(*input);
    }
  // The arguments into the inputs, ahead of the graph on the stream.
  for (auto [input, argument] : llvm::zip_equal(kind.inputs, arguments)) {
    if (argument.bytes == 0)
      continue;
    llvm::Error copied =
        argument.device
            ? driver.copyOnDevice(input, argument.device, argument.bytes,
                                  stream)
            : driver.copyToDevice(input, argument.host, argument.bytes, stream);
    if (copied)
      return Expected<Replayed>(std::move(copied));
  }
  if (capturing) {
    graph = capture(driver, kind, key, arguments, stream, invoke);
    if (!graph)
      return std::nullopt;
  }
  if (llvm::Error error = driver.launchGraph(graph->exec, stream))
    return Expected<Replayed>(std::move(error));
  ++replayed;
  return Expected<Replayed>(Replayed{graph->results, graph->outputs});
}

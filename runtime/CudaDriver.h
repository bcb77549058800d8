//===- CudaDriver.h - the CUDA driver API behind dlopen ---------*- C++ -*-===//
//
// The runtime's CUDA backend at its lowest level: libcuda.so.1 is opened
// with dlopen on first use, so every Switchyard binary starts (and reports
// "no driver") on machines without an NVIDIA driver, and nothing links
// against CUDA at build time. On top of the driver: module loading from
// cubin, fatbin or PTX, kernel launches, streams, and a caching device
// memory pool. Every failure is an llvm::Error naming the driver call, the
// driver's error name and text, and what was being done.
//
// The host code that Switchyard's GPU pipeline generates calls MLIR's
// `mgpu*` wrapper ABI (mgpuModuleLoad, mgpuLaunchKernel, mgpuMemAlloc, ...).
// `mgpuSymbols()` returns this backend's implementations of that ABI for the
// JIT; errors raised inside them are kept and returned by
// `takeDeferredError()` after the generated function returns.
//
// No CUDA header crosses this file: handles are opaque.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_CUDADRIVER_H
#define SWITCHYARD_RUNTIME_CUDADRIVER_H

#include "runtime/MemoryPlan.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace switchyard::runtime::cuda {

/// Opaque driver handles.
using Module = void *;
using Function = void *;
using Stream = void *;
using GraphExec = void *;
using DevicePtr = uint64_t;

/// What the runtime knows about the device it uses.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  /// Compute capability, e.g. 90 for sm_90.
  int computeCapability = 0;
  int multiprocessors = 0;
  uint64_t totalMemory = 0;
  /// The driver's CUDA version, e.g. 13000.
  int driverVersion = 0;
};

/// The CUDA driver with device 0's primary context current on the calling
/// thread. One per process; created on first use.
class Driver {
public:
  /// Opens libcuda.so.1, initialises the driver and device 0. Fails with a
  /// clear message where there is no driver or no device.
  static llvm::Expected<Driver &> get();

  /// Whether a driver and at least one device are present (never fails).
  static bool available();

  const DeviceInfo &device() const;

  /// Loads a module from a cubin, a fatbin, or PTX text (JIT-compiled by
  /// the driver; its log is part of the error on failure).
  llvm::Expected<Module> loadModule(llvm::StringRef image);
  llvm::Error unloadModule(Module module);
  llvm::Expected<Function> getFunction(Module module, llvm::StringRef name);

  /// Launches `function` on `grid` × `block` threads with `sharedBytes` of
  /// dynamic shared memory; `params` points at each kernel argument.
  llvm::Error launch(Function function, const uint32_t grid[3],
                     const uint32_t block[3], uint32_t sharedBytes,
                     Stream stream, void **params, llvm::StringRef what);

  llvm::Expected<Stream> createStream();
  llvm::Error synchronize(Stream stream);
  llvm::Error destroyStream(Stream stream);

  /// Device memory from the pool: freed blocks are kept per size class and
  /// reused, so a training loop allocates from the driver only in its first
  /// steps.
  llvm::Expected<DevicePtr> allocate(uint64_t bytes);
  void release(DevicePtr pointer);
  /// Returns every cached block to the driver.
  llvm::Error trimPool();
  /// Bytes held from the driver (in use and cached).
  uint64_t poolBytes() const;

  /// The allocations and frees of generated code (mgpuMemAlloc,
  /// mgpuMemFree) on the calling thread, from here to endPlannedCall(), go
  /// through the MemoryPlan of `key` (runtime/MemoryPlan.h; one per key,
  /// made on first use, its backend the pool): the first such call records
  /// them, the calls after it take their temporaries from one arena at
  /// fixed offsets. `key` names what decides the allocations: the function
  /// and its arguments' shapes.
  void beginPlannedCall(const std::string &key);
  void endPlannedCall();
  /// The plan of `key`; null before its first call.
  const MemoryPlan *memoryPlan(const std::string &key) const;
  /// The keys of the plans made so far.
  std::vector<std::string> memoryPlanKeys() const;

  /// CUDA graphs (stream capture): between beginCapture and endCapture,
  /// the work given to `stream` is recorded, not run (relaxed mode, so that
  /// the pool may allocate from the driver meanwhile); endCapture
  /// instantiates what was recorded, and launchGraph runs it on a stream,
  /// as one launch. A capture that met an operation streams cannot
  /// capture (a synchronisation) fails at endCapture.
  llvm::Error beginCapture(Stream stream);
  llvm::Expected<GraphExec> endCapture(Stream stream);
  llvm::Error launchGraph(GraphExec graph, Stream stream);
  void destroyGraph(GraphExec graph);
  /// Generated code on the calling thread, from here to endCapturedCall(),
  /// works on `stream` (capturing): the streams it creates are that one,
  /// and synchronising or destroying it does nothing, so that the calls a
  /// function makes, each on a stream of its own with one synchronisation
  /// at its end, are captured in their order on one stream.
  void beginCapturedCall(Stream stream);
  void endCapturedCall();

  llvm::Error copyToDevice(DevicePtr destination, const void *source,
                           uint64_t bytes, Stream stream);
  llvm::Error copyToHost(void *destination, DevicePtr source, uint64_t bytes,
                         Stream stream);
  llvm::Error copyOnDevice(DevicePtr destination, DevicePtr source,
                           uint64_t bytes, Stream stream);
  /// Any direction; unified addressing tells host from device pointers.
  llvm::Error copy(void *destination, const void *source, uint64_t bytes,
                   Stream stream);
  llvm::Error fill32(DevicePtr destination, uint32_t value, uint64_t count,
                     Stream stream);

  /// The TMA descriptor (a CUtensorMap) of a tiled view of `rank`-D memory
  /// at `address`, encoded by cuTensorMapEncodeTiled and copied to device
  /// memory, where kernels read it: returns its device address. Sizes and
  /// box sizes run innermost first, `strides` (bytes) skip the innermost.
  /// Descriptors are cached by their parameters and live as long as the
  /// Driver (a training loop encodes each distinct one once).
  llvm::Expected<DevicePtr>
  tensorMapTiled(int dataType, uint32_t rank, void *address,
                 const uint64_t *sizes, const uint64_t *strides,
                 const uint32_t *box, int interleave, int swizzle,
                 int l2Promotion, int outOfBoundsFill);

  ~Driver();
  Driver(const Driver &) = delete;
  Driver &operator=(const Driver &) = delete;

  struct Impl;

private:
  Driver();
  std::unique_ptr<Impl> impl;
};

/// The `mgpu*` wrapper ABI of MLIR's gpu-to-llvm host code, implemented on
/// the Driver: (symbol name, address) pairs for the JIT's symbol map.
std::vector<std::pair<std::string, void *>> mgpuSymbols();

/// The LLVM IR function type (as `llvm::FunctionType` prints it, e.g.
/// "void (ptr)") that generated host code declares for the wrapper `name`
/// and that mgpuSymbols() implements; empty for a name it does not provide.
llvm::StringRef mgpuLlvmType(llvm::StringRef name);

/// The first error an `mgpu*` wrapper met since the last call (they cannot
/// return errors to generated code), or success.
llvm::Error takeDeferredError();

//===----------------------------------------------------------------------===//
// Kernel profile
//===----------------------------------------------------------------------===//
//
// With profiling on, Driver::launch times every kernel with a pair of CUDA
// events on its stream and waits for the second, so that launches run one
// at a time: kernel times are exact, the program as a whole slower. The
// times add up per kernel name (the gpu.func names of the generated
// modules). `SWITCHYARD_KERNEL_PROFILE=1` in the environment turns it on
// when the driver opens and prints the profile on stderr at exit (its value
// is how many kernels the table lists; 1 or anything else not a number:
// 30).

/// One kernel's launches, with the geometry of the first.
struct KernelTime {
  std::string name;
  uint64_t launches = 0;
  double milliseconds = 0;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t sharedBytes = 0;
};

void setKernelProfiling(bool enabled);
bool kernelProfiling();
/// What was timed since the last reset, the longest total first.
std::vector<KernelTime> kernelProfile();
void resetKernelProfile();
/// A table of the `top` longest kernels (time, share of the total,
/// launches, mean, geometry, name) and a line for the rest and the total.
void printKernelProfile(llvm::raw_ostream &os,
                        const std::vector<KernelTime> &times, size_t top);

} // namespace switchyard::runtime::cuda

#endif // SWITCHYARD_RUNTIME_CUDADRIVER_H

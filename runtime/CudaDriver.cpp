//===- CudaDriver.cpp - the CUDA driver API behind dlopen -----------------===//
//
// cuda.h provides the types and the versioned entry-point names (cuMemAlloc
// is cuMemAlloc_v2, ...); the functions themselves come from dlsym on
// libcuda.so.1, resolved once.
//
//===----------------------------------------------------------------------===//

#include "runtime/CudaDriver.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

using namespace switchyard::runtime::cuda;
using switchyard::runtime::MemoryPlan;
using llvm::Expected;

namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

#define SWITCHYARD_STR(x) #x
#define SWITCHYARD_XSTR(x) SWITCHYARD_STR(x)

/// The driver entry points Switchyard uses. Each member has the type of the
/// function it names; cuda.h's macros give the versioned symbol names.
#define SWITCHYARD_CUDA_ENTRY_POINTS(X)                                        \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceTotalMem)                                                          \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxSetCurrent)                                                           \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuStreamCreate)                                                            \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamDestroy)                                                           \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemcpyAsync)                                                             \
  X(cuMemsetD32Async)                                                          \
  X(cuMemsetD16Async)                                                          \
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventElapsedTime)                                                        \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiateWithFlags)                                               \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)                                                            \
  X(cuTensorMapEncodeTiled)

struct EntryPoints {
#define SWITCHYARD_MEMBER(name) decltype(&::name) name = nullptr;
  SWITCHYARD_CUDA_ENTRY_POINTS(SWITCHYARD_MEMBER)
#undef SWITCHYARD_MEMBER
};

/// The kernel profile (CudaDriver.h): whether launches are timed, the
/// names of the functions the modules gave out, and the times by name.
std::atomic<bool> profiling{false};
std::mutex profileMutex;
llvm::DenseMap<void *, std::string> functionNames;
std::map<std::string, KernelTime> profileByName;

/// Pool size classes: powers of two from 256 bytes.
uint64_t sizeClass(uint64_t bytes) {
  return std::bit_ceil(std::max<uint64_t>(bytes, 256));
}

} // namespace

struct Driver::Impl {
  void *library = nullptr;
  EntryPoints cu;
  CUcontext context = nullptr;
  DeviceInfo info;
  std::mutex poolMutex;
  /// Free blocks by size class, and the class of every live block.
  std::map<uint64_t, std::vector<DevicePtr>> freeBlocks;
  /// TMA descriptors on the device, by their encoding parameters.
  std::mutex tensorMapMutex;
  std::map<std::vector<uint64_t>, DevicePtr> tensorMaps;
  llvm::DenseMap<DevicePtr, uint64_t> liveBlocks;
  uint64_t held = 0;
  /// The events that time a launch when profiling (created on first use),
  /// used by one launch at a time.
  std::mutex profileEventsMutex;
  CUevent profileStart = nullptr, profileStop = nullptr;
  /// The memory plans of planned calls, by key (created on first use).
  std::mutex planMutex;
  std::map<std::string, std::unique_ptr<MemoryPlan>> plans;

  /// An error naming the call, the driver's error and the context.
  llvm::Error check(CUresult result, llvm::StringRef call,
                    const llvm::Twine &what) const {
    if (result == CUDA_SUCCESS)
      return llvm::Error::success();
    const char *name = nullptr, *text = nullptr;
    if (cu.cuGetErrorName)
      cu.cuGetErrorName(result, &name);
    if (cu.cuGetErrorString)
      cu.cuGetErrorString(result, &text);
    return failure(llvm::formatv("CUDA: {0} failed with {1} ({2}) while {3}",
                                 call, name ? name : "an unknown error",
                                 text ? text : "no description", what.str()));
  }

  /// Makes the primary context current on the calling thread.
  llvm::Error makeCurrent() const {
    return check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent",
                 "making the device context current");
  }

  llvm::Error open();
};

llvm::Error Driver::Impl::open() {
  library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return failure(llvm::formatv(
        "no CUDA driver: cannot open libcuda.so.1 ({0}); GPU execution needs "
        "an NVIDIA driver, everything else runs on the CPU",
        dlerror()));
#define SWITCHYARD_RESOLVE(name)                                               \
  cu.name = reinterpret_cast<decltype(cu.name)>(                              \
      dlsym(library, SWITCHYARD_XSTR(name)));                                  \
  if (!cu.name)                                                                \
    return failure("the CUDA driver lacks " SWITCHYARD_XSTR(                   \
        name) "; update the NVIDIA driver");
  SWITCHYARD_CUDA_ENTRY_POINTS(SWITCHYARD_RESOLVE)
#undef SWITCHYARD_RESOLVE

  if (llvm::Error error = check(cu.cuInit(0), "cuInit",
                                "initialising the driver"))
    return error;
  int count = 0;
  if (llvm::Error error = check(cu.cuDeviceGetCount(&count),
                                "cuDeviceGetCount", "counting devices"))
    return error;
  if (count < 1)
    return failure("CUDA: the driver reports no device");
  CUdevice device;
  if (llvm::Error error =
          check(cu.cuDeviceGet(&device, 0), "cuDeviceGet", "opening device 0"))
    return error;
  char name[256] = {};
  int major = 0, minor = 0;
  size_t memory = 0;
  if (llvm::Error error = check(cu.cuDeviceGetName(name, sizeof(name), device),
                                "cuDeviceGetName", "naming device 0"))
    return error;
  (void)cu.cuDeviceGetAttribute(
      &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  (void)cu.cuDeviceGetAttribute(
      &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  (void)cu.cuDeviceGetAttribute(&info.multiprocessors,
                                CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                device);
  (void)cu.cuDeviceTotalMem(&memory, device);
  (void)cu.cuDriverGetVersion(&info.driverVersion);
  info.name = name;
  info.computeCapability = major * 10 + minor;
  info.totalMemory = memory;
  if (llvm::Error error =
          check(cu.cuDevicePrimaryCtxRetain(&context, device),
                "cuDevicePrimaryCtxRetain", "creating the device context"))
    return error;
  if (const char *value = std::getenv("SWITCHYARD_KERNEL_PROFILE");
      value && *value && llvm::StringRef(value) != "0") {
    static size_t top = 30;
    unsigned long long parsed;
    if (!llvm::StringRef(value).getAsInteger(10, parsed) && parsed > 1)
      top = parsed;
    setKernelProfiling(true);
    std::atexit([] {
      std::string text;
      llvm::raw_string_ostream os(text);
      printKernelProfile(os, kernelProfile(), top);
      std::fputs(text.c_str(), stderr);
    });
  }
  return makeCurrent();
}

Driver::Driver() : impl(std::make_unique<Impl>()) {}

// The process-wide driver lives until exit; the OS reclaims the context.
Driver::~Driver() = default;

Expected<Driver &> Driver::get() {
  static Driver *driver = nullptr;
  static std::string openError;
  static std::once_flag once;
  std::call_once(once, [] {
    auto *candidate = new Driver();
    if (llvm::Error error = candidate->impl->open()) {
      openError = llvm::toString(std::move(error));
      delete candidate;
      return;
    }
    driver = candidate;
  });
  if (!driver)
    return failure(openError);
  if (llvm::Error error = driver->impl->makeCurrent())
    return std::move(error);
  return *driver;
}

bool Driver::available() {
  Expected<Driver &> driver = get();
  if (!driver) {
    llvm::consumeError(driver.takeError());
    return false;
  }
  return true;
}

const DeviceInfo &Driver::device() const { return impl->info; }

Expected<Module> Driver::loadModule(llvm::StringRef image) {
  // PTX must be NUL-terminated text; cubins and fatbins are binary.
  std::string ptx;
  const void *data = image.data();
  if (image.starts_with("//") || image.contains(".version")) {
    ptx = image.str();
    data = ptx.c_str();
  }
  char log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log)))};
  CUmodule module = nullptr;
  CUresult result =
      impl->cu.cuModuleLoadDataEx(&module, data, 2, options, values);
  if (llvm::Error error =
          impl->check(result, "cuModuleLoadDataEx",
                      llvm::formatv("loading a GPU module for sm_{0}{1}{2}",
                                    impl->info.computeCapability,
                                    log[0] ? ": " : "", log)))
    return std::move(error);
  return static_cast<Module>(module);
}

llvm::Error Driver::unloadModule(Module module) {
  return impl->check(impl->cu.cuModuleUnload(static_cast<CUmodule>(module)),
                     "cuModuleUnload", "unloading a GPU module");
}

Expected<Function> Driver::getFunction(Module module, llvm::StringRef name) {
  CUfunction function = nullptr;
  std::string symbol = name.str();
  if (llvm::Error error = impl->check(
          impl->cu.cuModuleGetFunction(&function, static_cast<CUmodule>(module),
                                       symbol.c_str()),
          "cuModuleGetFunction", "looking up kernel '" + name + "'"))
    return std::move(error);
  {
    std::lock_guard<std::mutex> lock(profileMutex);
    functionNames[function] = symbol;
  }
  return static_cast<Function>(function);
}

llvm::Error Driver::launch(Function function, const uint32_t grid[3],
                           const uint32_t block[3], uint32_t sharedBytes,
                           Stream stream, void **params, llvm::StringRef what) {
  // Above 48 KiB of dynamic shared memory a kernel must opt in (CUDA
  // Programming Guide, "Shared Memory" of compute capability 7.x and up).
  constexpr uint32_t kDefaultSharedLimit = 48 * 1024;
  if (sharedBytes > kDefaultSharedLimit)
    if (llvm::Error error = impl->check(
            impl->cu.cuFuncSetAttribute(
                static_cast<CUfunction>(function),
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                static_cast<int>(sharedBytes)),
            "cuFuncSetAttribute",
            llvm::formatv("allowing {0} with {1} bytes of dynamic shared "
                          "memory",
                          what, sharedBytes)))
      return error;
  auto launchKernel = [&] {
    return impl->check(
        impl->cu.cuLaunchKernel(static_cast<CUfunction>(function), grid[0],
                                grid[1], grid[2], block[0], block[1],
                                block[2], sharedBytes,
                                static_cast<CUstream>(stream), params,
                                nullptr),
        "cuLaunchKernel",
        llvm::formatv("launching {0} on ({1}, {2}, {3}) blocks of ({4}, {5}, "
                      "{6}) threads",
                      what, grid[0], grid[1], grid[2], block[0], block[1],
                      block[2]));
  };
  if (!profiling.load(std::memory_order_relaxed))
    return launchKernel();

  // Profiling: events around the launch on its stream, waited for here.
  std::lock_guard<std::mutex> eventsLock(impl->profileEventsMutex);
  auto &cu = impl->cu;
  auto *cuStream = static_cast<CUstream>(stream);
  for (CUevent *event : {&impl->profileStart, &impl->profileStop})
    if (!*event)
      if (llvm::Error error =
              impl->check(cu.cuEventCreate(event, CU_EVENT_DEFAULT),
                          "cuEventCreate", "creating a profiling event"))
        return error;
  if (llvm::Error error =
          impl->check(cu.cuEventRecord(impl->profileStart, cuStream),
                      "cuEventRecord", "timing a kernel"))
    return error;
  if (llvm::Error error = launchKernel())
    return error;
  float milliseconds = 0;
  if (llvm::Error error = impl->check(
          cu.cuEventRecord(impl->profileStop, cuStream), "cuEventRecord",
          "timing a kernel"))
    return error;
  if (llvm::Error error = impl->check(
          cu.cuEventSynchronize(impl->profileStop), "cuEventSynchronize",
          llvm::formatv("waiting for {0} (profiling)", what)))
    return error;
  if (llvm::Error error = impl->check(
          cu.cuEventElapsedTime(&milliseconds, impl->profileStart,
                                impl->profileStop),
          "cuEventElapsedTime", "timing a kernel"))
    return error;
  std::lock_guard<std::mutex> lock(profileMutex);
  auto named = functionNames.find(function);
  std::string name = named != functionNames.end() ? named->second
                                                  : std::string(what);
  KernelTime &time = profileByName[name];
  if (time.launches == 0) {
    time.name = name;
    std::copy(grid, grid + 3, time.grid);
    std::copy(block, block + 3, time.block);
    time.sharedBytes = sharedBytes;
  }
  ++time.launches;
  time.milliseconds += milliseconds;
  return llvm::Error::success();
}

Expected<Stream> Driver::createStream() {
  CUstream stream = nullptr;
  if (llvm::Error error = impl->check(
          impl->cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
          "cuStreamCreate", "creating a stream"))
    return std::move(error);
  return static_cast<Stream>(stream);
}

llvm::Error Driver::synchronize(Stream stream) {
  return impl->check(
      impl->cu.cuStreamSynchronize(static_cast<CUstream>(stream)),
      "cuStreamSynchronize",
      "waiting for the GPU (a kernel before this point failed)");
}

llvm::Error Driver::destroyStream(Stream stream) {
  return impl->check(impl->cu.cuStreamDestroy(static_cast<CUstream>(stream)),
                     "cuStreamDestroy", "destroying a stream");
}

llvm::Error Driver::beginCapture(Stream stream) {
  return impl->check(
      impl->cu.cuStreamBeginCapture(static_cast<CUstream>(stream),
                                    CU_STREAM_CAPTURE_MODE_RELAXED),
      "cuStreamBeginCapture", "capturing a call as a CUDA graph");
}

Expected<GraphExec> Driver::endCapture(Stream stream) {
  CUgraph graph = nullptr;
  if (llvm::Error error = impl->check(
          impl->cu.cuStreamEndCapture(static_cast<CUstream>(stream), &graph),
          "cuStreamEndCapture", "ending the capture of a call"))
    return std::move(error);
  CUgraphExec exec = nullptr;
  llvm::Error instantiated = impl->check(
      impl->cu.cuGraphInstantiateWithFlags(&exec, graph, 0),
      "cuGraphInstantiateWithFlags", "instantiating a captured call");
  // The executable graph keeps what it needs of the graph.
  llvm::consumeError(impl->check(impl->cu.cuGraphDestroy(graph),
                                 "cuGraphDestroy", "destroying a graph"));
  if (instantiated)
    return std::move(instantiated);
  return static_cast<GraphExec>(exec);
}

llvm::Error Driver::launchGraph(GraphExec graph, Stream stream) {
  return impl->check(impl->cu.cuGraphLaunch(static_cast<CUgraphExec>(graph),
                                            static_cast<CUstream>(stream)),
                     "cuGraphLaunch", "replaying a captured call");
}

void Driver::destroyGraph(GraphExec graph) {
  if (graph)
    llvm::consumeError(
        impl->check(impl->cu.cuGraphExecDestroy(static_cast<CUgraphExec>(graph)),
                    "cuGraphExecDestroy", "destroying a captured call"));
}

Expected<DevicePtr> Driver::allocate(uint64_t bytes) {
  uint64_t size = sizeClass(bytes);
  std::lock_guard<std::mutex> lock(impl->poolMutex);
  std::vector<DevicePtr> &free = impl->freeBlocks[size];
  if (!free.empty()) {
    DevicePtr pointer = free.back();
    free.pop_back();
    impl->liveBlocks[pointer] = size;
    return pointer;
  }
  CUdeviceptr pointer = 0;
  CUresult result = impl->cu.cuMemAlloc(&pointer, size);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    // Give the cached blocks back and try once more.
    for (auto &[blockSize, blocks] : impl->freeBlocks)
      for (DevicePtr block : blocks) {
        (void)impl->cu.cuMemFree(block);
        impl->held -= blockSize;
      }
    impl->freeBlocks.clear();
    result = impl->cu.cuMemAlloc(&pointer, size);
  }
  if (llvm::Error error = impl->check(
          result, "cuMemAlloc",
          llvm::formatv("allocating {0} bytes of device memory ({1} held)",
                        size, impl->held)))
    return std::move(error);
  impl->held += size;
  impl->liveBlocks[pointer] = size;
  return DevicePtr(pointer);
}

void Driver::release(DevicePtr pointer) {
  if (!pointer)
    return;
  std::lock_guard<std::mutex> lock(impl->poolMutex);
  auto it = impl->liveBlocks.find(pointer);
  if (it == impl->liveBlocks.end())
    return;
  impl->freeBlocks[it->second].push_back(pointer);
  impl->liveBlocks.erase(it);
}

std::vector<std::string> Driver::memoryPlanKeys() const {
  std::lock_guard<std::mutex> lock(impl->planMutex);
  std::vector<std::string> keys;
  for (const auto &entry : impl->plans)
    keys.push_back(entry.first);
  return keys;
}

llvm::Error Driver::trimPool() {
  std::lock_guard<std::mutex> lock(impl->poolMutex);
  for (auto &[size, blocks] : impl->freeBlocks)
    for (DevicePtr block : blocks) {
      if (llvm::Error error = impl->check(impl->cu.cuMemFree(block),
                                          "cuMemFree", "trimming the pool"))
        return error;
      impl->held -= size;
    }
  impl->freeBlocks.clear();
  return llvm::Error::success();
}

uint64_t Driver::poolBytes() const { return impl->held; }

llvm::Error Driver::copyToDevice(DevicePtr destination, const void *source,
                                 uint64_t bytes, Stream stream) {
  return impl->check(
      impl->cu.cuMemcpyHtoDAsync(destination, source, bytes,
                                 static_cast<CUstream>(stream)),
      "cuMemcpyHtoDAsync",
      llvm::formatv("copying {0} bytes to the device", bytes));
}

llvm::Error Driver::copyToHost(void *destination, DevicePtr source,
                               uint64_t bytes, Stream stream) {
  return impl->check(
      impl->cu.cuMemcpyDtoHAsync(destination, source, bytes,
                                 static_cast<CUstream>(stream)),
      "cuMemcpyDtoHAsync",
      llvm::formatv("copying {0} bytes to the host", bytes));
}

llvm::Error Driver::copyOnDevice(DevicePtr destination, DevicePtr source,
                                 uint64_t bytes, Stream stream) {
  return impl->check(
      impl->cu.cuMemcpyDtoDAsync(destination, source, bytes,
                                 static_cast<CUstream>(stream)),
      "cuMemcpyDtoDAsync",
      llvm::formatv("copying {0} bytes on the device", bytes));
}

llvm::Error Driver::copy(void *destination, const void *source,
                         uint64_t bytes, Stream stream) {
  return impl->check(
      impl->cu.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(destination),
                             reinterpret_cast<CUdeviceptr>(source), bytes,
                             static_cast<CUstream>(stream)),
      "cuMemcpyAsync", llvm::formatv("copying {0} bytes", bytes));
}

llvm::Error Driver::fill32(DevicePtr destination, uint32_t value,
                           uint64_t count, Stream stream) {
  return impl->check(impl->cu.cuMemsetD32Async(destination, value, count,
                                               static_cast<CUstream>(stream)),
                     "cuMemsetD32Async",
                     llvm::formatv("filling {0} words", count));
}

llvm::Expected<DevicePtr>
Driver::tensorMapTiled(int dataType, uint32_t rank, void *address,
                       const uint64_t *sizes, const uint64_t *strides,
                       const uint32_t *box, int interleave, int swizzle,
                       int l2Promotion, int outOfBoundsFill) {
  // The key: every parameter, as words.
  std::vector<uint64_t> key = {uint64_t(dataType), rank,
                               reinterpret_cast<uint64_t>(address),
                               uint64_t(interleave), uint64_t(swizzle),
                               uint64_t(l2Promotion), uint64_t(outOfBoundsFill)};
  for (uint32_t r = 0; r < rank; ++r)
    key.insert(key.end(), {sizes[r], box[r], r + 1 < rank ? strides[r] : 0});
  std::lock_guard<std::mutex> lock(impl->tensorMapMutex);
  auto cached = impl->tensorMaps.find(key);
  if (cached != impl->tensorMaps.end())
    return cached->second;

  CUtensorMap map;
  std::vector<uint32_t> elementStrides(rank, 1);
  if (llvm::Error error = impl->check(
          impl->cu.cuTensorMapEncodeTiled(
              &map, static_cast<CUtensorMapDataType>(dataType), rank, address,
              sizes, strides, box, elementStrides.data(),
              static_cast<CUtensorMapInterleave>(interleave),
              static_cast<CUtensorMapSwizzle>(swizzle),
              static_cast<CUtensorMapL2promotion>(l2Promotion),
              static_cast<CUtensorMapFloatOOBfill>(outOfBoundsFill)),
          "cuTensorMapEncodeTiled",
          llvm::formatv("encoding a {0}-D TMA descriptor", rank)))
    return std::move(error);
  Expected<DevicePtr> device = allocate(sizeof(CUtensorMap));
  if (!device)
    return device.takeError();
  // Synchronously: the kernels that read it run on another stream.
  if (llvm::Error error =
          copyToDevice(*device, &map, sizeof(CUtensorMap), nullptr))
    return std::move(error);
  if (llvm::Error error = synchronize(nullptr))
    return std::move(error);
  impl->tensorMaps.emplace(std::move(key), *device);
  return *device;
}

//===----------------------------------------------------------------------===//
// The mgpu* wrapper ABI
//===----------------------------------------------------------------------===//

namespace {

/// The first error met inside a wrapper, kept for takeDeferredError().
std::mutex deferredMutex;
std::string deferred;

void defer(llvm::Error error) {
  if (!error)
    return;
  std::string message = llvm::toString(std::move(error));
  std::lock_guard<std::mutex> lock(deferredMutex);
  if (deferred.empty())
    deferred = std::move(message);
}

/// The plan that serves the generated code's allocations on this thread
/// (between Driver::beginPlannedCall and endPlannedCall), or null.
thread_local MemoryPlan *activePlan = nullptr;

/// The capturing stream of the generated code on this thread (between
/// Driver::beginCapturedCall and endCapturedCall), or null.
thread_local Stream capturingStream = nullptr;

/// The driver for a wrapper, or null with the error deferred.
Driver *driverOrDefer() {
  Expected<Driver &> driver = Driver::get();
  if (!driver) {
    defer(driver.takeError());
    return nullptr;
  }
  return &*driver;
}

extern "C" void *mgpuModuleLoad(void *data, size_t size) {
  Driver *driver = driverOrDefer();
  if (!driver)
    return nullptr;
  Expected<Module> module = driver->loadModule(
      llvm::StringRef(static_cast<const char *>(data), size));
  if (!module) {
    defer(module.takeError());
    return nullptr;
  }
  return *module;
}

extern "C" void mgpuModuleUnload(void *module) {
  if (Driver *driver = driverOrDefer(); driver && module)
    defer(driver->unloadModule(module));
}

extern "C" void *mgpuModuleGetFunction(void *module, const char *name) {
  Driver *driver = driverOrDefer();
  if (!driver)
    return nullptr;
  if (!module) {
    // The host code's global constructors did not run, or the load failed
    // (that error came first).
    defer(llvm::createStringError(llvm::formatv(
        "kernel '{0}': its module is not loaded", name)));
    return nullptr;
  }
  Expected<Function> function = driver->getFunction(module, name);
  if (!function) {
    defer(function.takeError());
    return nullptr;
  }
  return *function;
}

/// LLVM 22's host code passes the parameter count last.
extern "C" void mgpuLaunchKernel(void *function, intptr_t gridX,
                                 intptr_t gridY, intptr_t gridZ,
                                 intptr_t blockX, intptr_t blockY,
                                 intptr_t blockZ, int32_t sharedBytes,
                                 void *stream, void **params, void **,
                                 size_t) {
  Driver *driver = driverOrDefer();
  if (!driver)
    return;
  if (!function) {
    defer(llvm::createStringError("a kernel launch without a kernel (its "
                                  "lookup failed)"));
    return;
  }
  uint32_t grid[3] = {uint32_t(gridX), uint32_t(gridY), uint32_t(gridZ)};
  uint32_t block[3] = {uint32_t(blockX), uint32_t(blockY), uint32_t(blockZ)};
  defer(driver->launch(function, grid, block, uint32_t(sharedBytes), stream,
                       params, "a generated kernel"));
}

extern "C" void *mgpuStreamCreate() {
  if (capturingStream)
    return capturingStream;
  Driver *driver = driverOrDefer();
  if (!driver)
    return nullptr;
  Expected<Stream> stream = driver->createStream();
  if (!stream) {
    defer(stream.takeError());
    return nullptr;
  }
  return *stream;
}

extern "C" void mgpuStreamSynchronize(void *stream) {
  if (stream && stream == capturingStream)
    return;
  if (Driver *driver = driverOrDefer())
    defer(driver->synchronize(stream));
}

extern "C" void mgpuStreamDestroy(void *stream) {
  if (stream && stream == capturingStream)
    return;
  if (Driver *driver = driverOrDefer())
    defer(driver->destroyStream(stream));
}

extern "C" void *mgpuMemAlloc(uint64_t bytes, void *, bool) {
  if (MemoryPlan *plan = activePlan)
    return reinterpret_cast<void *>(plan->allocate(bytes));
  Driver *driver = driverOrDefer();
  if (!driver)
    return nullptr;
  Expected<DevicePtr> pointer = driver->allocate(bytes);
  if (!pointer) {
    defer(pointer.takeError());
    return nullptr;
  }
  return reinterpret_cast<void *>(*pointer);
}

extern "C" void mgpuMemFree(void *pointer, void *) {
  if (MemoryPlan *plan = activePlan)
    return plan->release(reinterpret_cast<DevicePtr>(pointer));
  if (Driver *driver = driverOrDefer())
    driver->release(reinterpret_cast<DevicePtr>(pointer));
}

/// LLVM 22's host code passes no size here: the PTX is NUL-terminated.
extern "C" void *mgpuModuleLoadJIT(void *data, int) {
  // PTX: the driver JIT-compiles it for the device at hand.
  return mgpuModuleLoad(data, std::strlen(static_cast<const char *>(data)));
}

extern "C" void mgpuMemcpy(void *destination, void *source, size_t bytes,
                           void *stream) {
  if (Driver *driver = driverOrDefer())
    defer(driver->copy(destination, source, bytes, stream));
}

extern "C" void mgpuMemset32(void *destination, unsigned value, size_t count,
                             void *stream) {
  if (Driver *driver = driverOrDefer())
    defer(driver->fill32(reinterpret_cast<DevicePtr>(destination), value,
                         count, stream));
}

/// The TMA descriptor of a ranked memref, as upstream's
/// CudaRuntimeWrappers.cpp makes it: the memref's sizes and strides reversed
/// (innermost first), strides in bytes, the box sizes reversed too. Unlike
/// upstream, the memref's offset is honoured and the device copy is cached
/// rather than leaked on every call.
extern "C" void *mgpuTensorMapEncodeTiledMemref(int64_t rank, void *descriptor,
                                                int64_t dataType,
                                                int64_t interleave,
                                                int64_t swizzle,
                                                int64_t l2Promotion,
                                                int64_t outOfBoundsFill,
                                                int64_t *boxSizes) {
  Driver *driver = driverOrDefer();
  if (!driver)
    return nullptr;
  // Element sizes by CUtensorMapDataType (UINT8 ... TFLOAT32_FTZ).
  static constexpr uint64_t kElementBytes[] = {1, 2, 4, 4, 8, 8, 2,
                                               4, 8, 2, 4, 4, 4};
  if (rank < 1 || rank > 5 || dataType < 0 ||
      dataType >= int64_t(std::size(kElementBytes))) {
    defer(llvm::createStringError(llvm::formatv(
        "mgpuTensorMapEncodeTiledMemref: unsupported rank {0} or data type "
        "{1}",
        rank, dataType)));
    return nullptr;
  }
  // {allocated, aligned, offset, sizes[rank], strides[rank]}.
  auto *words = static_cast<int64_t *>(descriptor);
  uint64_t elementBytes = kElementBytes[dataType];
  char *address = reinterpret_cast<char *>(words[1]) + words[2] * elementBytes;
  uint64_t sizes[5], strides[5];
  uint32_t box[5];
  for (int64_t r = 0; r < rank; ++r) {
    sizes[r] = uint64_t(words[3 + rank - 1 - r]);
    box[r] = uint32_t(boxSizes[rank - 1 - r]);
    if (r + 1 < rank)
      strides[r] = uint64_t(words[3 + rank + rank - 2 - r]) * elementBytes;
  }
  Expected<DevicePtr> map = driver->tensorMapTiled(
      int(dataType), uint32_t(rank), address, sizes, strides, box,
      int(interleave), int(swizzle), int(l2Promotion), int(outOfBoundsFill));
  if (!map) {
    defer(map.takeError());
    return nullptr;
  }
  return reinterpret_cast<void *>(*map);
}

} // namespace

void Driver::beginPlannedCall(const std::string &key) {
  std::lock_guard<std::mutex> lock(impl->planMutex);
  std::unique_ptr<MemoryPlan> &plan = impl->plans[key];
  if (!plan)
    plan = std::make_unique<MemoryPlan>(
        [this](uint64_t bytes) -> uint64_t {
          Expected<DevicePtr> pointer = allocate(bytes);
          if (!pointer) {
            defer(pointer.takeError());
            return 0;
          }
          return *pointer;
        },
        [this](uint64_t pointer) { release(pointer); });
  plan->beginCall();
  activePlan = plan.get();
}

void Driver::endPlannedCall() {
  if (activePlan)
    activePlan->endCall();
  activePlan = nullptr;
}

void Driver::beginCapturedCall(Stream stream) { capturingStream = stream; }

void Driver::endCapturedCall() { capturingStream = nullptr; }

const MemoryPlan *Driver::memoryPlan(const std::string &key) const {
  std::lock_guard<std::mutex> lock(impl->planMutex);
  auto it = impl->plans.find(key);
  return it == impl->plans.end() ? nullptr : it->second.get();
}


std::vector<std::pair<std::string, void *>> switchyard::runtime::cuda::
    mgpuSymbols() {
  return {
      {"mgpuModuleLoad", reinterpret_cast<void *>(&mgpuModuleLoad)},
      {"mgpuModuleLoadJIT", reinterpret_cast<void *>(&mgpuModuleLoadJIT)},
      {"mgpuModuleUnload", reinterpret_cast<void *>(&mgpuModuleUnload)},
      {"mgpuModuleGetFunction",
       reinterpret_cast<void *>(&mgpuModuleGetFunction)},
      {"mgpuLaunchKernel", reinterpret_cast<void *>(&mgpuLaunchKernel)},
      {"mgpuStreamCreate", reinterpret_cast<void *>(&mgpuStreamCreate)},
      {"mgpuStreamSynchronize",
       reinterpret_cast<void *>(&mgpuStreamSynchronize)},
      {"mgpuStreamDestroy", reinterpret_cast<void *>(&mgpuStreamDestroy)},
      {"mgpuMemAlloc", reinterpret_cast<void *>(&mgpuMemAlloc)},
      {"mgpuMemFree", reinterpret_cast<void *>(&mgpuMemFree)},
      {"mgpuMemcpy", reinterpret_cast<void *>(&mgpuMemcpy)},
      {"mgpuMemset32", reinterpret_cast<void *>(&mgpuMemset32)},
      {"mgpuTensorMapEncodeTiledMemref",
       reinterpret_cast<void *>(&mgpuTensorMapEncodeTiledMemref)},
  };
}

llvm::StringRef switchyard::runtime::cuda::mgpuLlvmType(llvm::StringRef name) {
  // The declarations gpu-to-llvm and the gpu.binary translation of LLVM 22
  // emit (mlir/lib/Conversion/GPUCommon/GPUToLLVMConversion.cpp,
  // mlir/lib/Target/LLVMIR/Dialect/GPU/SelectObjectAttr.cpp), as LLVM IR
  // prints their function types; the wrappers above match them.
  return llvm::StringSwitch<llvm::StringRef>(name)
      .Case("mgpuModuleLoad", "ptr (ptr, i64)")
      .Case("mgpuModuleLoadJIT", "ptr (ptr, i32)")
      .Case("mgpuModuleUnload", "void (ptr)")
      .Case("mgpuModuleGetFunction", "ptr (ptr, ptr)")
      .Case("mgpuLaunchKernel",
            "void (ptr, i64, i64, i64, i64, i64, i64, i32, ptr, ptr, ptr, i64)")
      .Case("mgpuStreamCreate", "ptr ()")
      .Case("mgpuStreamSynchronize", "void (ptr)")
      .Case("mgpuStreamDestroy", "void (ptr)")
      .Case("mgpuMemAlloc", "ptr (i64, ptr, i8)")
      .Case("mgpuMemFree", "void (ptr, ptr)")
      .Case("mgpuMemcpy", "void (ptr, ptr, i64, ptr)")
      .Case("mgpuMemset32", "void (ptr, i32, i64, ptr)")
      .Case("mgpuTensorMapEncodeTiledMemref",
            "ptr (i64, ptr, i64, i64, i64, i64, i64, ptr)")
      .Default("");
}

llvm::Error switchyard::runtime::cuda::takeDeferredError() {
  std::lock_guard<std::mutex> lock(deferredMutex);
  if (deferred.empty())
    return llvm::Error::success();
  std::string message = std::move(deferred);
  deferred.clear();
  return failure(message);
}

//===----------------------------------------------------------------------===//
// Kernel profile
//===----------------------------------------------------------------------===//

void switchyard::runtime::cuda::setKernelProfiling(bool enabled) {
  profiling.store(enabled);
}

bool switchyard::runtime::cuda::kernelProfiling() { return profiling.load(); }

std::vector<KernelTime> switchyard::runtime::cuda::kernelProfile() {
  std::vector<KernelTime> times;
  {
    std::lock_guard<std::mutex> lock(profileMutex);
    for (auto &[name, time] : profileByName)
      times.push_back(time);
  }
  std::sort(times.begin(), times.end(),
            [](const KernelTime &a, const KernelTime &b) {
              if (a.milliseconds != b.milliseconds)
                return a.milliseconds > b.milliseconds;
              return a.name < b.name;
            });
  return times;
}

void switchyard::runtime::cuda::resetKernelProfile() {
  std::lock_guard<std::mutex> lock(profileMutex);
  profileByName.clear();
}

void switchyard::runtime::cuda::printKernelProfile(
    llvm::raw_ostream &os, const std::vector<KernelTime> &times, size_t top) {
  double total = 0;
  uint64_t launches = 0;
  for (const KernelTime &time : times) {
    total += time.milliseconds;
    launches += time.launches;
  }
  os << llvm::formatv("kernel profile: {0} kernels, {1} launches, {2:F3} ms "
                      "of GPU time (each launch timed alone)\n",
                      times.size(), launches, total);
  if (times.empty())
    return;
  os << llvm::formatv("{0,12} {1,6} {2,9} {3,11}  {4,-16} {5,-12} {6,7}  {7}\n",
                      "total ms", "share", "launches", "mean us", "grid",
                      "block", "shared", "kernel");
  size_t shown = std::min(top, times.size());
  for (size_t i = 0; i < shown; ++i) {
    const KernelTime &time = times[i];
    os << llvm::formatv(
        "{0,12:F3} {1,5:F1}% {2,9} {3,11:F1}  {4,-16} {5,-12} {6,7}  {7}\n",
        time.milliseconds, total > 0 ? 100 * time.milliseconds / total : 0.0,
        time.launches, 1000 * time.milliseconds / double(time.launches),
        llvm::formatv("{0}x{1}x{2}", time.grid[0], time.grid[1], time.grid[2])
            .str(),
        llvm::formatv("{0}x{1}x{2}", time.block[0], time.block[1],
                      time.block[2])
            .str(),
        time.sharedBytes, time.name);
  }
  if (shown < times.size()) {
    double rest = 0;
    uint64_t restLaunches = 0;
    for (size_t i = shown; i < times.size(); ++i) {
      rest += times[i].milliseconds;
      restLaunches += times[i].launches;
    }
    os << llvm::formatv("{0,12:F3} {1,5:F1}% {2,9}  (the other {3} kernels)\n",
                        rest, total > 0 ? 100 * rest / total : 0.0,
                        restLaunches, times.size() - shown);
  }
}

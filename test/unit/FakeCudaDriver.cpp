//===- FakeCudaDriver.cpp - a libcuda.so.1 that launches nothing ----------===//
//
// A stand-in for the NVIDIA driver, built as libcuda.so.1 for the tests of
// the GPU backend's host code on machines without a GPU (GpuHostCodeTest):
// the runtime opens it as it opens the real driver (dlopen, the versioned
// entry points of cuda.h), and it behaves as one device of compute
// capability 9.0 whose memory is host memory. Copies and fills are real;
// modules are checked (a cubin's ELF image or PTX text) and their kernels
// looked up by name in the image; launches are checked (a known kernel,
// block and shared-memory limits, parameters given) and recorded, not run,
// so a kernel's outputs stay as they were (zero: allocations are cleared).
// Streams capture as the driver's do: between cuStreamBeginCapture and
// cuStreamEndCapture a stream's launches, copies and fills are kept in a
// graph instead of done, a synchronisation of it fails and spoils the
// capture, and cuGraphLaunch does (and records) the graph's work in order.
// The tests read the record through the `switchyardFake*` functions.
//
//===----------------------------------------------------------------------===//

#include <cuda.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

struct Module {
  std::string image;
};

struct Function {
  std::string name;
};

/// A captured graph: its work in capture order (a launch records its
/// kernel's name; a copy or fill does what it would have done).
struct Graph {
  std::vector<std::function<void()>> work;
  bool spoiled = false;
};

struct Stream {
  Graph *capture = nullptr;
};

struct State {
  std::mutex mutex;
  std::set<Module *> modules;
  std::set<Function *> functions;
  std::map<CUdeviceptr, size_t> allocations;
  std::vector<std::string> launches;
  size_t modulesLoaded = 0;
  size_t liveBytes = 0;
  size_t graphsInstantiated = 0;
  size_t graphLaunches = 0;
  size_t liveGraphs = 0;
};

State &state() {
  static State *s = new State();
  return *s;
}

int contextTag, eventTag;

/// `work` done now, or kept in the graph `stream` captures; false where
/// the stream is capturing and `capturable` is not.
bool doOrCapture(CUstream stream, std::function<void()> work,
                 bool capturable = true) {
  auto *fake = reinterpret_cast<Stream *>(stream);
  if (!fake || !fake->capture) {
    work();
    return true;
  }
  if (!capturable) {
    fake->capture->spoiled = true;
    return false;
  }
  fake->capture->work.push_back(std::move(work));
  return true;
}

/// The bytes of a module image: a cubin is an ELF file whose section
/// headers end it; anything else must be PTX text.
bool imageBytes(const void *image, std::string &bytes) {
  const auto *data = static_cast<const unsigned char *>(image);
  if (std::memcmp(data, "\x7f"
                        "ELF",
                  4) == 0) {
    if (data[4] != 2) // ELFCLASS64
      return false;
    uint64_t sectionHeaders;
    uint16_t entrySize, entries;
    std::memcpy(&sectionHeaders, data + 0x28, 8);
    std::memcpy(&entrySize, data + 0x3a, 2);
    std::memcpy(&entries, data + 0x3c, 2);
    bytes.assign(reinterpret_cast<const char *>(data),
                 sectionHeaders + uint64_t(entrySize) * entries);
    return true;
  }
  bytes = static_cast<const char *>(image);
  return bytes.find(".version") != std::string::npos &&
         bytes.find(".target") != std::string::npos;
}

} // namespace

extern "C" {

//===-- What the tests read ------------------------------------------------===//

/// Kernel launches recorded since the last reset.
size_t switchyardFakeLaunchCount() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().launches.size();
}

/// The kernel of launch `index`.
const char *switchyardFakeLaunchName(size_t index) {
  std::lock_guard<std::mutex> lock(state().mutex);
  return index < state().launches.size() ? state().launches[index].c_str()
                                         : nullptr;
}

/// Modules loaded since the start.
size_t switchyardFakeModulesLoaded() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().modulesLoaded;
}

/// Bytes of device memory allocated and not freed.
size_t switchyardFakeLiveBytes() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().liveBytes;
}

/// Graphs instantiated and graph launches since the start; graphs alive.
size_t switchyardFakeGraphsInstantiated() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().graphsInstantiated;
}
size_t switchyardFakeGraphLaunches() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().graphLaunches;
}
size_t switchyardFakeLiveGraphs() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().liveGraphs;
}

void switchyardFakeResetLaunches() {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().launches.clear();
}

//===-- The driver API -----------------------------------------------------===//

CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }

CUresult cuDriverGetVersion(int *version) {
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
  switch (error) {
  case CUDA_ERROR_INVALID_VALUE:
    *name = "CUDA_ERROR_INVALID_VALUE";
    break;
  case CUDA_ERROR_INVALID_HANDLE:
    *name = "CUDA_ERROR_INVALID_HANDLE";
    break;
  case CUDA_ERROR_NOT_FOUND:
    *name = "CUDA_ERROR_NOT_FOUND";
    break;
  case CUDA_ERROR_INVALID_IMAGE:
    *name = "CUDA_ERROR_INVALID_IMAGE";
    break;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    break;
  default:
    *name = "CUDA_ERROR_UNKNOWN";
  }
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult, const char **text) {
  *text = "reported by the fake CUDA driver of Switchyard's tests";
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int length, CUdevice) {
  std::strncpy(name, "Switchyard fake CUDA device", size_t(length) - 1);
  name[length - 1] = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                              CUdevice) {
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = 9;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = 0;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 4;
    break;
  default:
    *value = 0;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice) {
  *bytes = size_t(1) << 32;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice) {
  *context = reinterpret_cast<CUcontext>(&contextTag);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int,
                            CUjit_option *, void **) {
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  auto *loaded = new Module();
  if (!imageBytes(image, loaded->image)) {
    delete loaded;
    return CUDA_ERROR_INVALID_IMAGE;
  }
  std::lock_guard<std::mutex> lock(state().mutex);
  state().modules.insert(loaded);
  ++state().modulesLoaded;
  *module = reinterpret_cast<CUmodule>(loaded);
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto *loaded = reinterpret_cast<Module *>(module);
  if (!state().modules.erase(loaded))
    return CUDA_ERROR_INVALID_HANDLE;
  delete loaded;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                             const char *name) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto *loaded = reinterpret_cast<Module *>(module);
  if (!state().modules.count(loaded))
    return CUDA_ERROR_INVALID_HANDLE;
  // The name, NUL-terminated, among the image's strings.
  std::string key(name, std::strlen(name) + 1);
  if (loaded->image.find(key) == std::string::npos &&
      loaded->image.find(".entry " + std::string(name)) == std::string::npos)
    return CUDA_ERROR_NOT_FOUND;
  auto *found = new Function{name};
  state().functions.insert(found);
  *function = reinterpret_cast<CUfunction>(found);
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int gridX,
                        unsigned int gridY, unsigned int gridZ,
                        unsigned int blockX, unsigned int blockY,
                        unsigned int blockZ, unsigned int sharedBytes,
                        CUstream stream, void **params, void **extra) {
  std::string name;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto *kernel = reinterpret_cast<Function *>(function);
    if (!state().functions.count(kernel))
      return CUDA_ERROR_INVALID_HANDLE;
    if (gridX * gridY * gridZ == 0 || blockX * blockY * blockZ == 0 ||
        blockX * blockY * blockZ > 1024 || sharedBytes > 227 * 1024 ||
        (!params && !extra))
      return CUDA_ERROR_INVALID_VALUE;
    name = kernel->name;
  }
  doOrCapture(stream, [name] {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().launches.push_back(name);
  });
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *stream, unsigned int) {
  *stream = reinterpret_cast<CUstream>(new Stream());
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  // A capturing stream cannot be waited for; the capture is spoiled.
  return doOrCapture(stream, [] {}, /*capturable=*/false)
             ? CUDA_SUCCESS
             : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult cuStreamDestroy(CUstream stream) {
  auto *fake = reinterpret_cast<Stream *>(stream);
  if (!fake)
    return CUDA_ERROR_INVALID_HANDLE;
  if (fake->capture)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  delete fake;
  return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode) {
  auto *fake = reinterpret_cast<Stream *>(stream);
  if (!fake)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // the legacy stream
  if (fake->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  fake->capture = new Graph();
  return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph) {
  auto *fake = reinterpret_cast<Stream *>(stream);
  if (!fake || !fake->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  Graph *captured = fake->capture;
  fake->capture = nullptr;
  if (captured->spoiled) {
    delete captured;
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *graph = reinterpret_cast<CUgraph>(captured);
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                     unsigned long long) {
  if (!graph)
    return CUDA_ERROR_INVALID_VALUE;
  *exec = reinterpret_cast<CUgraphExec>(
      new Graph(*reinterpret_cast<Graph *>(graph)));
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().graphsInstantiated;
  ++state().liveGraphs;
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  auto *graph = reinterpret_cast<Graph *>(exec);
  if (!graph)
    return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().graphLaunches;
  }
  // A launch on a capturing stream would nest the graph: not needed here.
  if (!doOrCapture(stream, [graph] {
        for (const std::function<void()> &work : graph->work)
          work();
      }))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  if (!exec)
    return CUDA_ERROR_INVALID_VALUE;
  delete reinterpret_cast<Graph *>(exec);
  std::lock_guard<std::mutex> lock(state().mutex);
  --state().liveGraphs;
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
  if (!graph)
    return CUDA_ERROR_INVALID_VALUE;
  delete reinterpret_cast<Graph *>(graph);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  void *memory = std::calloc(1, bytes ? bytes : 1);
  if (!memory)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations[*pointer] = bytes;
  state().liveBytes += bytes;
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr pointer) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto found = state().allocations.find(pointer);
  if (found == state().allocations.end())
    return CUDA_ERROR_INVALID_VALUE;
  state().liveBytes -= found->second;
  state().allocations.erase(found);
  std::free(reinterpret_cast<void *>(pointer));
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr destination, const void *source,
                           size_t bytes, CUstream stream) {
  doOrCapture(stream, [=] {
    std::memcpy(reinterpret_cast<void *>(destination), source, bytes);
  });
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync(void *destination, CUdeviceptr source, size_t bytes,
                           CUstream stream) {
  doOrCapture(stream, [=] {
    std::memcpy(destination, reinterpret_cast<const void *>(source), bytes);
  });
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr destination, CUdeviceptr source,
                           size_t bytes, CUstream stream) {
  doOrCapture(stream, [=] {
    std::memmove(reinterpret_cast<void *>(destination),
                 reinterpret_cast<const void *>(source), bytes);
  });
  return CUDA_SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr destination, CUdeviceptr source,
                       size_t bytes, CUstream stream) {
  return cuMemcpyDtoDAsync(destination, source, bytes, stream);
}

CUresult cuMemsetD32Async(CUdeviceptr destination, unsigned int value,
                          size_t count, CUstream stream) {
  doOrCapture(stream, [=] {
    auto *words = reinterpret_cast<uint32_t *>(destination);
    for (size_t i = 0; i < count; ++i)
      words[i] = value;
  });
  return CUDA_SUCCESS;
}

CUresult cuMemsetD16Async(CUdeviceptr destination, unsigned short value,
                          size_t count, CUstream stream) {
  doOrCapture(stream, [=] {
    auto *halves = reinterpret_cast<uint16_t *>(destination);
    for (size_t i = 0; i < count; ++i)
      halves[i] = value;
  });
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *event, unsigned int) {
  *event = reinterpret_cast<CUevent>(&eventTag);
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }

CUresult cuEventElapsedTime(float *milliseconds, CUevent, CUevent) {
  *milliseconds = 0.001f;
  return CUDA_SUCCESS;
}

CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType,
                                cuuint32_t rank, void *address,
                                const cuuint64_t *, const cuuint64_t *,
                                const cuuint32_t *, const cuuint32_t *,
                                CUtensorMapInterleave, CUtensorMapSwizzle,
                                CUtensorMapL2promotion,
                                CUtensorMapFloatOOBfill) {
  if (rank < 1 || rank > 5 || !address)
    return CUDA_ERROR_INVALID_VALUE;
  std::memset(map, 0, sizeof(*map));
  return CUDA_SUCCESS;
}

} // extern "C"

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
// The tests read the record through the `switchyardFake*` functions.
//
//===----------------------------------------------------------------------===//

#include <cuda.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
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

struct State {
  std::mutex mutex;
  std::set<Module *> modules;
  std::set<Function *> functions;
  std::map<CUdeviceptr, size_t> allocations;
  std::vector<std::string> launches;
  size_t modulesLoaded = 0;
  size_t liveBytes = 0;
};

State &state() {
  static State *s = new State();
  return *s;
}

int contextTag, streamTag, eventTag;

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
                        CUstream, void **params, void **extra) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto *kernel = reinterpret_cast<Function *>(function);
  if (!state().functions.count(kernel))
    return CUDA_ERROR_INVALID_HANDLE;
  if (gridX * gridY * gridZ == 0 || blockX * blockY * blockZ == 0 ||
      blockX * blockY * blockZ > 1024 || sharedBytes > 227 * 1024 ||
      (!params && !extra))
    return CUDA_ERROR_INVALID_VALUE;
  state().launches.push_back(kernel->name);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *stream, unsigned int) {
  *stream = reinterpret_cast<CUstream>(&streamTag);
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
CUresult cuStreamDestroy(CUstream) { return CUDA_SUCCESS; }

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
                           size_t bytes, CUstream) {
  std::memcpy(reinterpret_cast<void *>(destination), source, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync(void *destination, CUdeviceptr source, size_t bytes,
                           CUstream) {
  std::memcpy(destination, reinterpret_cast<const void *>(source), bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr destination, CUdeviceptr source,
                           size_t bytes, CUstream) {
  std::memmove(reinterpret_cast<void *>(destination),
               reinterpret_cast<const void *>(source), bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr destination, CUdeviceptr source,
                       size_t bytes, CUstream) {
  return cuMemcpyDtoDAsync(destination, source, bytes, nullptr);
}

CUresult cuMemsetD32Async(CUdeviceptr destination, unsigned int value,
                          size_t count, CUstream) {
  auto *words = reinterpret_cast<uint32_t *>(destination);
  for (size_t i = 0; i < count; ++i)
    words[i] = value;
  return CUDA_SUCCESS;
}

CUresult cuMemsetD16Async(CUdeviceptr destination, unsigned short value,
                          size_t count, CUstream) {
  auto *halves = reinterpret_cast<uint16_t *>(destination);
  for (size_t i = 0; i < count; ++i)
    halves[i] = value;
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

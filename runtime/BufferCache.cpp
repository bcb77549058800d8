//===- BufferCache.cpp - malloc and free of the compiled CPU code ---------===//
//
// Each block carries a 16-byte header with its size, so that free knows
// whether it is large (and which free list it belongs to) without a lookup.
//
//===----------------------------------------------------------------------===//

#include "runtime/BufferCache.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

using namespace switchyard::runtime;

namespace {

/// The header before each block: its size, padded to malloc's alignment.
struct alignas(16) Header {
  size_t size;
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<Header *>> free;
  size_t bytes = 0;
};

Cache &cache() {
  // Never destroyed: compiled code may free buffers during static
  // destruction (a program held by a global).
  static Cache *instance = new Cache();
  return *instance;
}

} // namespace

extern "C" void *switchyard::runtime::switchyardBufferAlloc(size_t size) {
  if (size >= kLargeBlock) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free.find(size);
    if (it != c.free.end() && !it->second.empty()) {
      Header *block = it->second.back();
      it->second.pop_back();
      c.bytes -= size;
      return block + 1;
    }
  }
  auto *block = static_cast<Header *>(std::malloc(sizeof(Header) + size));
  if (!block)
    return nullptr;
  block->size = size;
  return block + 1;
}

extern "C" void *switchyard::runtime::switchyardBufferCalloc(size_t count,
                                                            size_t size) {
  if (size != 0 && count > SIZE_MAX / size)
    return nullptr;
  void *pointer = switchyardBufferAlloc(count * size);
  if (pointer)
    std::memset(pointer, 0, count * size);
  return pointer;
}

extern "C" void switchyard::runtime::switchyardBufferFree(void *pointer) {
  if (!pointer)
    return;
  Header *block = static_cast<Header *>(pointer) - 1;
  size_t size = block->size;
  if (size >= kLargeBlock) {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.bytes + size <= kCacheLimit) {
      c.free[size].push_back(block);
      c.bytes += size;
      return;
    }
  }
  std::free(block);
}

size_t switchyard::runtime::bufferCacheBytes() {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

void switchyard::runtime::bufferCacheTrim() {
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto &[size, blocks] : c.free)
    for (Header *block : blocks)
      std::free(block);
  c.free.clear();
  c.bytes = 0;
}

//===- BufferCache.cpp - malloc and free of the compiled CPU code ---------===//
//
// Each block carries a header of kBlockAlignment bytes with its size (its
// class), so that free knows whether it is large (and which free list it
// belongs to) without a lookup, and the block after it stays aligned.
//
//===----------------------------------------------------------------------===//

#include "runtime/BufferCache.h"
#include "runtime/Params.h"

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

using namespace switchyard::runtime;

namespace {

/// The header before each block: its size, padded to the blocks'
/// alignment.
struct alignas(kBlockAlignment) Header {
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

/// The state of a callGuarded call on this thread: where to jump when an
/// allocation fails, and the blocks the call holds.
struct Guard {
  sigjmp_buf jump;
  size_t failedSize = 0;
  std::unordered_set<void *> live;
};
thread_local Guard *activeGuard = nullptr;

/// Ends the guarded call on this thread, if there is one, for an
/// allocation of `size` bytes that failed; returns when there is none.
void failAllocation(size_t size) {
  if (Guard *guard = activeGuard) {
    guard->failedSize = size;
    siglongjmp(guard->jump, 1);
  }
}

/// The size class of a large block: `size` rounded up to the next of eight
/// steps between powers of two (at most 1/8 more), so that buffers whose
/// sizes follow the data (a grouped expert's routes) reuse each other's
/// blocks instead of each new size faulting in fresh pages.
size_t sizeClass(size_t size) {
  if (size < kLargeBlock)
    return size;
  size_t step = (size_t(1) << (63 - __builtin_clzll(size))) / 8;
  return (size + step - 1) / step * step;
}

void *allocateBlock(size_t size) {
  size = sizeClass(size);
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
  if (size_t limit = physicalMemory();
      (limit && size > limit) ||
      size > SIZE_MAX - sizeof(Header) - kBlockAlignment)
    return nullptr;
  // aligned_alloc wants a multiple of the alignment.
  size_t bytes = (sizeof(Header) + size + kBlockAlignment - 1) /
                 kBlockAlignment * kBlockAlignment;
  auto *block =
      static_cast<Header *>(std::aligned_alloc(kBlockAlignment, bytes));
  if (!block)
    return nullptr;
  block->size = size;
  return block + 1;
}

} // namespace

extern "C" void *switchyard::runtime::switchyardBufferAlloc(size_t size) {
  void *pointer = allocateBlock(size);
  if (!pointer) {
    failAllocation(size);
    return nullptr;
  }
  if (Guard *guard = activeGuard)
    guard->live.insert(pointer);
  return pointer;
}

extern "C" void *
switchyard::runtime::switchyardBufferAlignedAlloc(size_t alignment,
                                                 size_t size) {
  if (alignment == 0 || alignment > kBlockAlignment ||
      (alignment & (alignment - 1)) != 0)
    return nullptr;
  return switchyardBufferAlloc(size);
}

extern "C" void *switchyard::runtime::switchyardBufferCalloc(size_t count,
                                                            size_t size) {
  if (size != 0 && count > SIZE_MAX / size) {
    failAllocation(SIZE_MAX);
    return nullptr;
  }
  void *pointer = switchyardBufferAlloc(count * size);
  if (pointer)
    std::memset(pointer, 0, count * size);
  return pointer;
}

extern "C" void switchyard::runtime::switchyardBufferFree(void *pointer) {
  if (!pointer)
    return;
  if (Guard *guard = activeGuard)
    guard->live.erase(pointer);
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

std::string switchyard::runtime::callGuarded(void (*function)(void **),
                                             void **arguments) {
  Guard guard;
  Guard *outer = activeGuard;
  activeGuard = &guard;
  // Nothing with a destructor lives in this frame between sigsetjmp and a
  // jump back to it.
  if (sigsetjmp(guard.jump, 0) == 0) {
    function(arguments);
    activeGuard = outer;
    return {};
  }
  activeGuard = outer;
  for (void *pointer : guard.live)
    switchyardBufferFree(pointer);
  size_t size = guard.failedSize;
  if (size == SIZE_MAX)
    return "out of memory: an allocation's size overflows";
  auto human = [](size_t bytes) {
    char text[32];
    if (bytes >= size_t(1e12))
      std::snprintf(text, sizeof text, "%.2f TB", double(bytes) / 1e12);
    else
      std::snprintf(text, sizeof text, "%.2f GB", double(bytes) / 1e9);
    return std::string(text);
  };
  return "out of memory allocating " + human(size) + " (" +
         std::to_string(size) + " bytes); this machine has " +
         human(physicalMemory());
}

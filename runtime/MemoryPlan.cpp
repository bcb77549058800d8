//===- MemoryPlan.cpp - one arena for a call's temporaries ----------------===//
//
// The arena planner and the record-and-replay allocator of MemoryPlan.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/MemoryPlan.h"

#include <algorithm>
#include <numeric>

using namespace switchyard::runtime;

namespace {
constexpr size_t kNotFreed = ~size_t(0);

/// The bytes a buffer of `bytes` takes in the arena: at least one, rounded
/// up to the alignment.
uint64_t slotBytes(uint64_t bytes, uint64_t alignment) {
  return (std::max<uint64_t>(bytes, 1) + alignment - 1) / alignment * alignment;
}
} // namespace

uint64_t switchyard::runtime::planArena(const std::vector<BufferLife> &buffers,
                                        std::vector<uint64_t> &offsets,
                                        uint64_t alignment) {
  offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; among equals, the earlier allocation.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  std::vector<size_t> placed;
  uint64_t size = 0;
  for (size_t index : order) {
    const BufferLife &buffer = buffers[index];
    uint64_t bytes = slotBytes(buffer.bytes, alignment);
    // The placed buffers live at the same time, by offset.
    std::vector<size_t> overlapping;
    for (size_t other : placed)
      if (buffers[other].begin < buffer.end && buffer.begin < buffers[other].end)
        overlapping.push_back(other);
    std::sort(overlapping.begin(), overlapping.end(),
              [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
    // The lowest gap that fits.
    uint64_t offset = 0;
    for (size_t other : overlapping) {
      if (offset + bytes <= offsets[other])
        break;
      uint64_t otherEnd =
          offsets[other] + slotBytes(buffers[other].bytes, alignment);
      offset = std::max(offset, otherEnd);
    }
    offsets[index] = offset;
    size = std::max(size, offset + bytes);
    placed.push_back(index);
  }
  return size;
}

MemoryPlan::MemoryPlan(Allocate allocate, Release release, uint64_t alignment)
    : backendAllocate(std::move(allocate)), backendRelease(std::move(release)),
      alignment(alignment) {}

MemoryPlan::~MemoryPlan() { dropArena(); }

void MemoryPlan::dropArena() {
  if (arena && liveArena.empty())
    backendRelease(arena);
  // Buffers of the arena still live (a call that strayed returned one):
  // the arena stays allocated, forgotten, rather than freed under them.
  arena = 0;
  arenaSize = 0;
  liveArena.clear();
  planBytes.clear();
  planOffsets.clear();
}

void MemoryPlan::beginCall() {
  next = 0;
  if (arena) {
    mode = Mode::Replay;
    return;
  }
  mode = Mode::Record;
  recordedBytes.clear();
  allocatedAt.clear();
  freedAt.clear();
  liveRecorded.clear();
  events = 0;
}

uint64_t MemoryPlan::allocate(uint64_t bytes) {
  switch (mode) {
  case Mode::Record: {
    uint64_t pointer = backendAllocate(bytes);
    if (!pointer)
      return 0;
    liveRecorded[pointer] = recordedBytes.size();
    recordedBytes.push_back(bytes);
    allocatedAt.push_back(events++);
    freedAt.push_back(kNotFreed);
    return pointer;
  }
  case Mode::Replay:
    if (next < planBytes.size() && planBytes[next] == bytes) {
      uint64_t offset = planOffsets[next++];
      if (offset == kEscapes)
        return backendAllocate(bytes);
      liveArena.insert(arena + offset);
      return arena + offset;
    }
    mode = Mode::Stray;
    ++strayed;
    return backendAllocate(bytes);
  case Mode::Idle:
  case Mode::Stray:
    return backendAllocate(bytes);
  }
  return 0;
}

void MemoryPlan::release(uint64_t pointer) {
  if (arena && pointer >= arena && pointer < arena + arenaSize) {
    liveArena.erase(pointer);
    return;
  }
  if (mode == Mode::Record) {
    auto it = liveRecorded.find(pointer);
    if (it != liveRecorded.end()) {
      freedAt[it->second] = events++;
      liveRecorded.erase(it);
    }
  }
  backendRelease(pointer);
}

void MemoryPlan::endCall() {
  Mode ended = mode;
  mode = Mode::Idle;
  if (ended == Mode::Replay && next == planBytes.size() && liveArena.empty()) {
    ++replayed;
    return;
  }
  if (ended == Mode::Replay || ended == Mode::Stray) {
    // Fewer allocations than recorded, or an arena buffer outliving the
    // call, count as straying too; the next call records again.
    if (ended == Mode::Replay)
      ++strayed;
    dropArena();
    return;
  }
  if (ended != Mode::Record)
    return;
  ++recorded;
  std::vector<BufferLife> lives;
  std::vector<size_t> planned;
  for (size_t i = 0; i < recordedBytes.size(); ++i)
    if (freedAt[i] != kNotFreed) {
      lives.push_back({recordedBytes[i], allocatedAt[i], freedAt[i]});
      planned.push_back(i);
    }
  std::vector<uint64_t> offsets;
  uint64_t size = planArena(lives, offsets, alignment);
  if (size == 0)
    return;
  uint64_t block = backendAllocate(size);
  if (!block)
    return;
  arena = block;
  arenaSize = size;
  unsharedBytes = 0;
  for (const BufferLife &life : lives)
    unsharedBytes += slotBytes(life.bytes, alignment);
  planBytes = recordedBytes;
  planOffsets.assign(recordedBytes.size(), kEscapes);
  for (size_t k = 0; k < planned.size(); ++k)
    planOffsets[planned[k]] = offsets[k];
}

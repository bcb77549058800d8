//===- MemoryPlan.h - one arena for a call's temporaries --------*- C++ -*-===//
//
// A compiled function allocates and frees the same temporaries in the same
// order on every call with the same argument shapes (a training step). A
// MemoryPlan records that order once, then gives every temporary a fixed
// offset in one arena, two buffers sharing memory only when their lifetimes
// do not overlap (planArena: the greedy-by-size placement of TensorFlow
// Lite's arena planner), and serves the calls that follow from it: no
// allocation and no free per call, and every temporary at the same address
// on every call, which a CUDA graph's replay needs.
//
// Allocations are events in call order; a buffer lives from its allocation
// to its free. A buffer not freed by the end of the recorded call escapes
// (a result the caller owns): it is never planned, and its allocation in a
// later call goes to the backend as before. A call whose allocations differ
// from the record (another size, more or fewer) falls back to the backend
// from that allocation on, and the next call records again.
//
// Plain C++, no driver: the backend's allocate and release are functions,
// so that the plan is tested on the host (test/unit/MemoryPlanTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_MEMORYPLAN_H
#define SWITCHYARD_RUNTIME_MEMORYPLAN_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace switchyard::runtime {

/// A buffer of a recorded call: its size, and the events [begin, end)
/// during which it is live (its allocation's index, its free's index).
struct BufferLife {
  uint64_t bytes = 0;
  size_t begin = 0;
  size_t end = 0;
};

/// Offsets in one arena for `buffers`, each a multiple of `alignment`: two
/// buffers whose lifetimes overlap never overlap in memory. Largest
/// buffers first, each at the lowest offset that fits between the placed
/// buffers it overlaps in time. Returns the arena's size.
uint64_t planArena(const std::vector<BufferLife> &buffers,
                   std::vector<uint64_t> &offsets, uint64_t alignment);

/// The recorded allocations of one kind of call and the arena that serves
/// them.
class MemoryPlan {
public:
  /// The backend: allocate returns 0 on failure.
  using Allocate = std::function<uint64_t(uint64_t bytes)>;
  using Release = std::function<void(uint64_t pointer)>;

  MemoryPlan(Allocate allocate, Release release, uint64_t alignment = 256);
  ~MemoryPlan();
  MemoryPlan(const MemoryPlan &) = delete;
  MemoryPlan &operator=(const MemoryPlan &) = delete;

  /// A call begins: it records (no plan yet, or the last call strayed from
  /// it) or replays the plan.
  void beginCall();
  /// The call ended: a recording becomes the plan (its arena allocated from
  /// the backend; without it, the next call records again).
  void endCall();

  /// An allocation of the call, from the arena when the plan has it, else
  /// from the backend. 0 when the backend fails.
  uint64_t allocate(uint64_t bytes);
  /// A free of the call: nothing for an arena buffer, the backend's
  /// release for any other.
  void release(uint64_t pointer);

  /// Whether calls are served from the arena.
  bool planned() const { return arena != 0; }
  /// The arena's bytes and address (0 without a plan).
  uint64_t arenaBytes() const { return arenaSize; }
  uint64_t arenaAddress() const { return arena; }
  /// The bytes the planned buffers would take without sharing.
  uint64_t plannedBytes() const { return unsharedBytes; }
  /// Calls served from the arena from beginning to end.
  size_t replayedCalls() const { return replayed; }
  /// Calls that recorded, and calls that strayed from the plan.
  size_t recordedCalls() const { return recorded; }
  size_t strayedCalls() const { return strayed; }

private:
  enum class Mode { Idle, Record, Replay, Stray };

  void dropArena();

  Allocate backendAllocate;
  Release backendRelease;
  uint64_t alignment;
  Mode mode = Mode::Idle;

  // The recording: each allocation's size, the event of its free (or none),
  // and the pointers the backend gave it, for the frees.
  std::vector<uint64_t> recordedBytes;
  std::vector<size_t> allocatedAt;
  std::vector<size_t> freedAt;
  std::unordered_map<uint64_t, size_t> liveRecorded;
  size_t events = 0;

  // The plan: per allocation in call order, its offset in the arena, or
  // kEscapes for one the backend serves.
  static constexpr uint64_t kEscapes = ~uint64_t(0);
  std::vector<uint64_t> planBytes;
  std::vector<uint64_t> planOffsets;
  uint64_t arena = 0;
  uint64_t arenaSize = 0;
  /// The arena's buffers handed out and not yet freed in this call.
  std::unordered_set<uint64_t> liveArena;
  uint64_t unsharedBytes = 0;
  size_t next = 0;

  size_t replayed = 0, recorded = 0, strayed = 0;
};

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_MEMORYPLAN_H

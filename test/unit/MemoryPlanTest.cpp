//===- MemoryPlanTest.cpp - one arena for a call's temporaries ------------===//
//
// The arena planner never lets two buffers that live at the same time
// share memory, at random lifetimes and sizes, and lets those that do not
// share it; the record-and-replay allocator serves the calls after the
// first from its arena at the same addresses, gives escaping buffers to
// the backend, and records again after a call that strays from the plan.
//
//===----------------------------------------------------------------------===//

#include "runtime/MemoryPlan.h"

#include "gtest/gtest.h"

#include <map>
#include <random>

using namespace switchyard::runtime;

namespace {

uint64_t aligned(uint64_t bytes, uint64_t alignment) {
  return (std::max<uint64_t>(bytes, 1) + alignment - 1) / alignment * alignment;
}

TEST(MemoryPlanTest, BuffersLiveAtOnceNeverOverlap) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<BufferLife> buffers;
    size_t events = 0;
    for (int i = 0; i < 150; ++i) {
      BufferLife life;
      life.bytes = random() % 5000;
      life.begin = events++;
      life.end = life.begin + 1 + random() % 40;
      buffers.push_back(life);
    }
    const uint64_t alignment = 256;
    std::vector<uint64_t> offsets;
    uint64_t size = planArena(buffers, offsets, alignment);
    ASSERT_EQ(offsets.size(), buffers.size());
    uint64_t unshared = 0, peak = 0;
    for (size_t a = 0; a < buffers.size(); ++a) {
      uint64_t bytesA = aligned(buffers[a].bytes, alignment);
      unshared += bytesA;
      EXPECT_EQ(offsets[a] % alignment, 0u);
      EXPECT_LE(offsets[a] + bytesA, size);
      for (size_t b = a + 1; b < buffers.size(); ++b) {
        bool together = buffers[a].begin < buffers[b].end &&
                        buffers[b].begin < buffers[a].end;
        if (!together)
          continue;
        uint64_t bytesB = aligned(buffers[b].bytes, alignment);
        bool apart = offsets[a] + bytesA <= offsets[b] ||
                     offsets[b] + bytesB <= offsets[a];
        EXPECT_TRUE(apart) << "buffers " << a << " and " << b
                           << " live at once and overlap";
      }
    }
    // At least the most bytes live at one event; less than all of them.
    for (size_t event = 0; event < events + 40; ++event) {
      uint64_t live = 0;
      for (const BufferLife &buffer : buffers)
        if (buffer.begin <= event && event < buffer.end)
          live += aligned(buffer.bytes, alignment);
      peak = std::max(peak, live);
    }
    EXPECT_GE(size, peak);
    EXPECT_LT(size, unshared);
  }
}

TEST(MemoryPlanTest, BuffersApartInTimeShareMemory) {
  // a [0, 2), b [1, 3), c [2, 4): c takes a's place after a is freed.
  std::vector<BufferLife> buffers = {{100, 0, 2}, {100, 1, 3}, {100, 2, 4}};
  std::vector<uint64_t> offsets;
  EXPECT_EQ(planArena(buffers, offsets, 64), 256u);
  EXPECT_EQ(offsets[0], offsets[2]);
  EXPECT_NE(offsets[0], offsets[1]);
}

/// A backend that hands out distinct addresses and counts its calls.
struct Backend {
  uint64_t nextAddress = 1 << 20;
  std::map<uint64_t, uint64_t> live;
  size_t allocations = 0, releases = 0;
  MemoryPlan plan{[this](uint64_t bytes) {
                    ++allocations;
                    uint64_t address = nextAddress;
                    nextAddress += (bytes + 4095) / 4096 * 4096 + 4096;
                    live[address] = bytes;
                    return address;
                  },
                  [this](uint64_t pointer) {
                    ++releases;
                    EXPECT_EQ(live.erase(pointer), 1u) << "unknown release";
                  }};

  /// A call: a and c (1000 bytes) one after the other while b (500 bytes)
  /// lives, and a result r of `resultBytes` that escapes. Returns the
  /// addresses of a, b, c and r.
  std::vector<uint64_t> call(uint64_t resultBytes = 10) {
    plan.beginCall();
    uint64_t a = plan.allocate(1000);
    uint64_t b = plan.allocate(500);
    plan.release(a);
    uint64_t c = plan.allocate(1000);
    plan.release(b);
    uint64_t r = plan.allocate(resultBytes);
    plan.release(c);
    plan.endCall();
    return {a, b, c, r};
  }
};

TEST(MemoryPlanTest, CallsAfterTheFirstComeFromTheArena) {
  Backend backend;
  std::vector<uint64_t> first = backend.call();
  EXPECT_TRUE(backend.plan.planned());
  EXPECT_EQ(backend.plan.recordedCalls(), 1u);
  // The arena: a and c share their place, b has its own.
  EXPECT_EQ(backend.plan.arenaBytes(), 1024u + 512u);
  EXPECT_EQ(backend.plan.plannedBytes(), 1024u + 1024u + 512u);

  size_t allocationsBefore = backend.allocations;
  std::vector<uint64_t> second = backend.call();
  std::vector<uint64_t> third = backend.call();
  EXPECT_EQ(backend.plan.replayedCalls(), 2u);
  // Only the escaping result asks the backend, once per call.
  EXPECT_EQ(backend.allocations, allocationsBefore + 2);
  EXPECT_EQ(second[0], second[2]);
  EXPECT_NE(second[0], second[1]);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(second[i], third[i]);
  EXPECT_NE(second[3], 0u);
  EXPECT_NE(second[3], first[3]);
  // The caller frees the results it owns.
  for (uint64_t result : {first[3], second[3], third[3]})
    backend.plan.release(result);
}

TEST(MemoryPlanTest, ACallThatStraysRecordsAgain) {
  Backend backend;
  std::vector<uint64_t> first = backend.call();
  // The result's size follows the data this time: from there on the
  // backend serves the call, and the next call records again.
  std::vector<uint64_t> strayed = backend.call(/*resultBytes=*/20);
  EXPECT_EQ(backend.plan.strayedCalls(), 1u);
  EXPECT_FALSE(backend.plan.planned());
  std::vector<uint64_t> recorded = backend.call(20);
  EXPECT_EQ(backend.plan.recordedCalls(), 2u);
  EXPECT_TRUE(backend.plan.planned());
  std::vector<uint64_t> replayed = backend.call(20);
  EXPECT_EQ(backend.plan.replayedCalls(), 1u);
  for (uint64_t result : {first[3], strayed[3], recorded[3], replayed[3]})
    backend.plan.release(result);
  // Nothing but the arena is left with the backend.
  EXPECT_EQ(backend.live.size(), 1u);
}

} // namespace

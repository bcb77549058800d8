//===- ComputeThreadsTest.cpp - the compiled code's parallel loops --------===//
//
// switchyardParallelFor runs every iteration exactly once, in chunks that
// start on an iteration, for any bounds, step and thread count; a loop
// started from inside a task runs inline; the thread count is settable.
//
//===----------------------------------------------------------------------===//

#include "runtime/ComputeThreads.h"

#include "gtest/gtest.h"

#include <atomic>
#include <thread>
#include <vector>

namespace rt = switchyard::runtime;

namespace {

/// What the tasks record: how often each index ran, and on which threads.
struct Record {
  int64_t lower = 0, step = 1;
  std::vector<std::atomic<int>> runs;
  std::atomic<bool> misaligned{false};
  explicit Record(size_t size) : runs(size) {}
};

void countIterations(void *frame, int64_t begin, int64_t end) {
  auto *record = static_cast<Record *>(frame);
  if ((begin - record->lower) % record->step != 0)
    record->misaligned = true;
  for (int64_t i = begin; i < end; i += record->step)
    record->runs[i].fetch_add(1);
}

TEST(ComputeThreadsTest, EveryIterationRunsOnce) {
  for (unsigned threads : {1u, 2u, 4u, 7u}) {
    rt::setComputeThreads(threads);
    EXPECT_EQ(rt::computeThreads(), threads);
    for (auto [lower, upper, step] :
         {std::tuple<int64_t, int64_t, int64_t>{0, 1000, 1},
          {3, 1000, 7},
          {5, 6, 1},
          {0, 3, 4},
          {10, 10, 1},
          {0, 37, 2}}) {
      Record record(1000);
      record.lower = lower;
      record.step = step;
      uint64_t before = rt::parallelLoopsRun();
      rt::switchyardParallelFor(countIterations, &record, lower, upper, step);
      int64_t iterations = upper > lower ? (upper - lower + step - 1) / step : 0;
      EXPECT_EQ(rt::parallelLoopsRun() - before,
                threads > 1 && iterations > 1 ? 1u : 0u);
      EXPECT_FALSE(record.misaligned);
      for (int64_t i = 0; i < 1000; ++i) {
        bool iteration = i >= lower && i < upper && (i - lower) % step == 0;
        EXPECT_EQ(record.runs[i].load(), iteration ? 1 : 0)
            << "i = " << i << " of [" << lower << ", " << upper << ") by "
            << step << " on " << threads << " threads";
      }
    }
  }
  rt::setComputeThreads(0);
  EXPECT_GE(rt::computeThreads(), 1u);
}

/// A task that starts a loop of its own, which runs inline.
struct Nested {
  std::atomic<int> inner{0};
  std::atomic<bool> otherThread{false};
};

void innerTask(void *frame, int64_t begin, int64_t end) {
  auto *record = static_cast<std::pair<Nested *, std::thread::id> *>(frame);
  if (std::this_thread::get_id() != record->second)
    record->first->otherThread = true;
  record->first->inner.fetch_add(int(end - begin));
}

void outerTask(void *frame, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    std::pair<Nested *, std::thread::id> record{static_cast<Nested *>(frame),
                                                std::this_thread::get_id()};
    rt::switchyardParallelFor(innerTask, &record, 0, 10, 1);
  }
}

TEST(ComputeThreadsTest, NestedLoopsRunInline) {
  rt::setComputeThreads(2);
  Nested nested;
  rt::switchyardParallelFor(outerTask, &nested, 0, 8, 1);
  EXPECT_EQ(nested.inner.load(), 80);
  EXPECT_FALSE(nested.otherThread);
  rt::setComputeThreads(0);
}

} // namespace

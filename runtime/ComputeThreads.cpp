//===- ComputeThreads.cpp - the threads compiled CPU code runs on ---------===//
//
// A pool of workers that spin briefly, then sleep, between parallel loops
// (a training step runs thousands of them, many short), and one job at a
// time: the chunks of one loop, taken from an atomic counter by the caller
// and the workers alike.
//
//===----------------------------------------------------------------------===//

#include "runtime/ComputeThreads.h"

#include "llvm/Support/Threading.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using namespace switchyard::runtime;

namespace {

/// One parallel loop and its progress (a worker late to a loop finds its
/// chunks taken, not the next loop's).
struct Job {
  void (*task)(void *, int64_t, int64_t) = nullptr;
  void *frame = nullptr;
  int64_t lower = 0, upper = 0, step = 1, iterationsPerChunk = 1;
  int64_t chunks = 0;
  std::atomic<int64_t> nextChunk{0}, remaining{0};
};

/// A short wait in a spin loop: the CPU's pause hint where there is one.
inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

/// Whether this thread is running a chunk (a nested loop runs inline).
thread_local bool inTask = false;

/// Runs chunks of `job` until none is left.
void runChunks(Job &job) {
  bool outer = inTask;
  inTask = true;
  for (int64_t chunk = job.nextChunk.fetch_add(1, std::memory_order_relaxed);
       chunk < job.chunks;
       chunk = job.nextChunk.fetch_add(1, std::memory_order_relaxed)) {
    int64_t begin = job.lower + chunk * job.iterationsPerChunk * job.step;
    int64_t end =
        std::min(job.upper, begin + job.iterationsPerChunk * job.step);
    job.task(job.frame, begin, end);
    job.remaining.fetch_sub(1, std::memory_order_acq_rel);
  }
  inTask = outer;
}

class Pool {
public:
  explicit Pool(unsigned workers) {
    for (unsigned i = 0; i < workers; ++i)
      threads.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
      generation.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();
    for (std::thread &thread : threads)
      thread.join();
  }

  unsigned size() const { return threads.size() + 1; }

  void run(std::shared_ptr<Job> next) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      job = next;
      generation.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();
    runChunks(*next);
    // The workers' last chunks: short, as chunks go; spin.
    while (next->remaining.load(std::memory_order_acquire) != 0)
      relax();
  }

private:
  void work() {
    uint64_t seen = 0;
    for (;;) {
      // Spin for the next loop a little (they come in quick succession),
      // then sleep until one comes.
      auto until = std::chrono::steady_clock::now() +
                   std::chrono::microseconds(200);
      while (generation.load(std::memory_order_acquire) == seen &&
             std::chrono::steady_clock::now() < until)
        relax();
      std::shared_ptr<Job> current;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] {
          return generation.load(std::memory_order_acquire) != seen;
        });
        seen = generation.load(std::memory_order_acquire);
        if (stopping)
          return;
        current = job;
      }
      runChunks(*current);
    }
  }

  std::vector<std::thread> threads;
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<uint64_t> generation{0};
  bool stopping = false;
  std::shared_ptr<Job> job;
};

std::atomic<uint64_t> loopsRun{0};

struct State {
  std::mutex mutex; // one parallel loop at a time, and the pool's changes
  unsigned requested = 0;
  std::unique_ptr<Pool> pool;
};

State &state() {
  // Never destroyed: compiled code may run during static destruction.
  static State *instance = new State();
  return *instance;
}

unsigned resolve(unsigned requested) {
  return requested ? requested
                   : llvm::hardware_concurrency().compute_thread_count();
}

} // namespace

void switchyard::runtime::setComputeThreads(unsigned threads) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.requested = threads;
  if (s.pool && s.pool->size() != resolve(threads))
    s.pool.reset();
}

uint64_t switchyard::runtime::parallelLoopsRun() { return loopsRun.load(); }

unsigned switchyard::runtime::computeThreads() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return resolve(s.requested);
}

extern "C" void switchyard::runtime::switchyardParallelFor(
    void (*task)(void *, int64_t, int64_t), void *frame, int64_t lower,
    int64_t upper, int64_t step) {
  if (upper <= lower)
    return;
  int64_t iterations = (upper - lower + step - 1) / step;
  State &s = state();
  if (iterations == 1 || inTask) {
    task(frame, lower, upper);
    return;
  }
  std::unique_lock<std::mutex> lock(s.mutex);
  unsigned threads = resolve(s.requested);
  if (threads <= 1) {
    lock.unlock();
    task(frame, lower, upper);
    return;
  }
  if (!s.pool)
    s.pool = std::make_unique<Pool>(threads - 1);
  // A few chunks per thread, for loops whose iterations differ in cost.
  auto job = std::make_shared<Job>();
  job->task = task;
  job->frame = frame;
  job->lower = lower;
  job->upper = upper;
  job->step = step;
  int64_t chunks = std::min<int64_t>(iterations, 4 * int64_t(threads));
  job->iterationsPerChunk = (iterations + chunks - 1) / chunks;
  job->chunks = (iterations + job->iterationsPerChunk - 1) /
                job->iterationsPerChunk;
  job->remaining.store(job->chunks, std::memory_order_relaxed);
  loopsRun.fetch_add(1, std::memory_order_relaxed);
  s.pool->run(std::move(job));
}

//===- ComputeThreads.h - the threads compiled CPU code runs on -*- C++ -*-===//
//
// The compiled CPU code's parallel loops (switchyard-cpu-outline-loops marks
// them, the JIT's dispatchParallelLoops calls switchyardParallelFor for
// each) run on a pool shared by every program of the process: the calling
// thread and `computeThreads() - 1` workers, each taking chunks of
// iterations in turn. Iterations are independent, so results do not depend
// on the thread count.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_COMPUTETHREADS_H
#define SWITCHYARD_RUNTIME_COMPUTETHREADS_H

#include <cstdint>

namespace switchyard::runtime {

/// Sets the threads the compiled code's parallel loops run on, the calling
/// thread included: 0 (the default) for one per core, 1 for the calling
/// thread alone. Not while a compiled function runs.
void setComputeThreads(unsigned threads);

/// The threads the compiled code's parallel loops run on.
unsigned computeThreads();

/// How many parallel loops have run on more than one thread so far (for
/// tests and reports).
uint64_t parallelLoopsRun();

/// Runs `task(frame, begin, end)` for chunks [begin, end) of the iterations
/// from `lower` to `upper` by `step` (chunk bounds are iterations), on the
/// compute threads; returns when all have run. A call from inside a task
/// runs every iteration on the calling thread.
extern "C" void switchyardParallelFor(void (*task)(void *, int64_t, int64_t),
                                      void *frame, int64_t lower,
                                      int64_t upper, int64_t step);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_COMPUTETHREADS_H

//===- BufferCache.h - malloc and free of the compiled CPU code -*- C++ -*-===//
//
// The compiled CPU code allocates every temporary buffer with malloc and
// frees it with free (memref.alloc and memref.dealloc after the
// bufferization's deallocation pipeline). A program called again and again
// (a training loop, a benchmark) asks for the same sizes on every call;
// with glibc, blocks that large come from fresh pages (mmap, or the top of
// the heap trimmed back after each call), so every call pays the kernel for
// faulting in and zeroing all of its temporaries again, a large part of the
// time of a layer with big temporaries (an XL attention's score tensors).
//
// CpuProgram binds the JIT-compiled code's malloc, calloc, aligned_alloc and
// free to switchyardBufferAlloc, switchyardBufferCalloc,
// switchyardBufferAlignedAlloc and switchyardBufferFree:
// blocks of at least kLargeBlock bytes are kept after free, by size class
// (the size rounded up to the next eighth between powers of two, at most
// 1/8 more), and handed out again to the next request of that class, so
// that buffers whose sizes follow the data (a grouped expert's routes) find
// one too; smaller ones go straight to malloc and free. HostTensor's bytes
// (runtime/TensorFile.h) come from here as well: the tensors a training
// step returns take the blocks of the step before. The cache holds at most
// kCacheLimit bytes (beyond that, freed blocks go back to the system) and
// is shared by every CpuProgram of the process; it is thread-safe.
// Buffers a program returns are released with bufferFree too. Calls made
// through callGuarded end with an error, not a crash, when memory runs out.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_BUFFERCACHE_H
#define SWITCHYARD_RUNTIME_BUFFERCACHE_H

#include <cstddef>
#include <string>

namespace switchyard::runtime {

/// Blocks from this size on are cached after free.
inline constexpr size_t kLargeBlock = 64 * 1024;
/// The most bytes the cache holds.
inline constexpr size_t kCacheLimit = size_t(2) << 30;
/// The alignment of every block: a cache line, what the bufferization asks
/// of each buffer (so that vector loads do not straddle lines).
inline constexpr size_t kBlockAlignment = 64;

/// malloc for the compiled code: kBlockAlignment-aligned, a cached block of
/// the size class of `size` when one is free. Null when the system is out
/// of memory.
extern "C" void *switchyardBufferAlloc(size_t size);

/// aligned_alloc for the compiled code (memref.alloc, lowered with
/// `use-aligned-alloc` so that a buffer begins where it was allocated):
/// switchyardBufferAlloc for an `alignment` of at most kBlockAlignment, a
/// power of two; null for any other (and when out of memory).
extern "C" void *switchyardBufferAlignedAlloc(size_t alignment, size_t size);

/// calloc for the compiled code (LLVM may fold a malloc followed by a zero
/// fill into a calloc call): switchyardBufferAlloc, zeroed. Null on
/// overflow or when the system is out of memory.
extern "C" void *switchyardBufferCalloc(size_t count, size_t size);

/// free for the compiled code: keeps large blocks for reuse (up to
/// kCacheLimit bytes in all). A null pointer is ignored.
extern "C" void switchyardBufferFree(void *pointer);

/// Calls `function` (a JIT-compiled function's packed interface) with
/// `arguments` so that an allocation the system cannot satisfy ends the call
/// instead of handing the compiled code a null pointer it would write
/// through: the allocator jumps back here (siglongjmp: the compiled code
/// has no cleanups to skip), every block the call allocated and has not
/// freed is released, and the message names the size, e.g. "out of memory
/// allocating 1.23 GB (1234567890 bytes); this machine has 25.30 GB". A single request larger than
/// the machine's physical memory is refused at once, before the system
/// overcommits it. The compiled code must run on the calling thread.
/// Returns an empty string on success.
std::string callGuarded(void (*function)(void **), void **arguments);

/// The bytes the cache holds now (freed blocks kept for reuse).
size_t bufferCacheBytes();

/// Returns every cached block to the system.
void bufferCacheTrim();

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_BUFFERCACHE_H

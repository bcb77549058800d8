//===- CompileCache.h - compiled programs kept between runs -----*- C++ -*-===//
//
// A persistent cache of compiled programs, as Triton keeps one of its
// kernels: an entry holds a program's native code (the JIT's relocatable
// objects) and what the runtime needs to call it (its functions and
// parameters), under a key that hashes everything the code depends on
// (the model's text, the compile options, the compiler build, this
// machine's CPU). Entries are written atomically, so that processes
// compiling the same model at once leave one whole entry; an entry that is
// truncated, corrupt or of another format is a miss, and the next compile
// replaces it.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_COMPILECACHE_H
#define SWITCHYARD_RUNTIME_COMPILECACHE_H

#include "runtime/Params.h"
#include "runtime/Program.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace switchyard::runtime {

/// The cache directory the tools use: $SWITCHYARD_CACHE_DIR, else
/// $XDG_CACHE_HOME/switchyard, else $HOME/.cache/switchyard; empty (no
/// cache) when none of these is set.
std::string defaultCacheDirectory();

/// One compiled program.
struct CacheEntry {
  std::vector<FunctionSpec> functions;
  ParamTable params;
  /// Program::backend() of the program.
  std::string backend;
  /// Its native code: the relocatable objects the JIT made (they link with
  /// each other).
  std::vector<std::string> objects;
  /// The functions of `objects` that run before its first call and after its
  /// last, in order (the GPU host code's kernel module loads and unloads).
  std::vector<std::string> constructors, destructors;
};

/// The name of the entry for `description`, a text that covers everything
/// the compiled code depends on: a SHA-256 digest in hexadecimal.
std::string cacheKey(llvm::StringRef description);

/// The path of entry `key` in `directory`.
std::string cacheEntryPath(llvm::StringRef directory, llvm::StringRef key);

/// The entry `key` of `directory`; nullopt when there is none or it cannot
/// be used (truncated, corrupt, of another format).
std::optional<CacheEntry> readCacheEntry(llvm::StringRef directory,
                                         llvm::StringRef key);

/// Writes `entry` as `key` of `directory` (created if missing),
/// atomically: a reader sees the old entry, or none, or the whole new one.
llvm::Error writeCacheEntry(llvm::StringRef directory, llvm::StringRef key,
                            const CacheEntry &entry);

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_COMPILECACHE_H

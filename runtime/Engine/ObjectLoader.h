//===- ObjectLoader.h - native code linked into this process ----*- C++ -*-===//
//
// Links the relocatable objects of a program (NativeCode.h made them now,
// or earlier and the compile cache kept them) into this process: ORC's
// RTDyld object layer, the symbols the program registers, then this
// process's and the shared libraries'; the packed entry points
// (`_mlir_<name>`) looked up. And a program's store into and load from the
// compile cache, which both backends share.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_ENGINE_OBJECTLOADER_H
#define SWITCHYARD_RUNTIME_ENGINE_OBJECTLOADER_H

#include "runtime/CompileCache.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>

namespace llvm::orc {
class LLJIT;
} // namespace llvm::orc

namespace switchyard::runtime::detail {

/// A function's packed entry point: `void f(void **arguments)`.
using PackedFunction = void (*)(void **);

/// A program's objects linked into this process.
class LoadedCode {
public:
  ~LoadedCode();

  /// Links `objects`, which may refer to each other's symbols. Other
  /// undefined symbols resolve to `symbols` first, then to this process's
  /// and the libraries at `sharedLibraries`. The objects are linked on the
  /// first lookup; `entryPoints`, the C interfaces the program exports, are
  /// looked up here, so that the linking happens now and finds every one.
  static llvm::Expected<std::unique_ptr<LoadedCode>>
  load(llvm::ArrayRef<std::string> objects,
       llvm::ArrayRef<llvm::StringRef> sharedLibraries,
       llvm::function_ref<llvm::orc::SymbolMap(llvm::orc::MangleAndInterner)>
           symbols,
       llvm::ArrayRef<FunctionSpec> entryPoints);

  /// The packed entry point `_mlir_<name>` of function `name`
  /// (addPackedEntryPoints, lib/Target/LLVMIR/JitPreparation.h).
  llvm::Expected<PackedFunction> lookupPacked(llvm::StringRef name);

  /// The address of symbol `name` (a function without arguments: a kernel
  /// module's loader, say).
  llvm::Expected<void (*)()> lookupFunction(llvm::StringRef name);

private:
  LoadedCode();
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

/// Entry `key` of the compile cache in `directory` with its objects linked
/// into `code` (LoadedCode::load); nullopt where there is none or it
/// cannot be used (the program is then compiled and stored again).
std::optional<CacheEntry> loadCachedProgram(
    llvm::StringRef directory, llvm::StringRef key,
    llvm::ArrayRef<llvm::StringRef> sharedLibraries,
    llvm::function_ref<llvm::orc::SymbolMap(llvm::orc::MangleAndInterner)>
        symbols,
    std::unique_ptr<LoadedCode> &code);

/// Stores `entry` (with its objects) as `key` in `directory`; what
/// happened, for a program's cacheReport().
std::string storeProgram(llvm::StringRef directory, llvm::StringRef key,
                         const CacheEntry &entry);

} // namespace switchyard::runtime::detail

#endif // SWITCHYARD_RUNTIME_ENGINE_OBJECTLOADER_H

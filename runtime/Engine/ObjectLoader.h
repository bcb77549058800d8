//===- ObjectLoader.h - native code from the compile cache ------*- C++ -*-===//
//
// Links a relocatable object that the JIT made earlier (CompileCache.h)
// into this process, as mlir::ExecutionEngine links the code it compiles:
// the same object layer, the same symbols (those the program registers,
// then this process's and the shared libraries'), and the same packed
// entry points (`_mlir_<name>`); and a program's store into and load from
// the compile cache, which both backends share.
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

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace switchyard::runtime::detail {

/// A function's packed entry point: `void f(void **arguments)`.
using PackedFunction = void (*)(void **);

/// An object linked into this process.
class LoadedObject {
public:
  ~LoadedObject();

  /// Links `object`. Its undefined symbols resolve to `symbols` first, then
  /// to this process's and the libraries at `sharedLibraries`.
  static llvm::Expected<std::unique_ptr<LoadedObject>>
  load(llvm::StringRef object, llvm::ArrayRef<llvm::StringRef> sharedLibraries,
       llvm::function_ref<llvm::orc::SymbolMap(llvm::orc::MangleAndInterner)>
           symbols);

  /// The packed entry point of function `name` (mlir::ExecutionEngine::
  /// lookupPacked's).
  llvm::Expected<PackedFunction> lookupPacked(llvm::StringRef name);

  /// The address of symbol `name` (a function without arguments: a kernel
  /// module's loader, say).
  llvm::Expected<void (*)()> lookupFunction(llvm::StringRef name);

private:
  LoadedObject();
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

/// Entry `key` of the compile cache in `directory` with its object linked
/// into `object` (as LoadedObject::load links it) and the C interface of
/// every function it lists resolved; nullopt where there is none or it
/// cannot be used (the program is then compiled and stored again).
std::optional<CacheEntry> loadCachedProgram(
    llvm::StringRef directory, llvm::StringRef key,
    llvm::ArrayRef<llvm::StringRef> sharedLibraries,
    llvm::function_ref<llvm::orc::SymbolMap(llvm::orc::MangleAndInterner)>
        symbols,
    std::unique_ptr<LoadedObject> &object);

/// Stores `entry` with the object of `engine` (created with
/// enableObjectDump) as `key` in `directory`; what happened, for a
/// program's cacheReport().
std::string storeProgram(mlir::ExecutionEngine &engine,
                         llvm::StringRef directory, llvm::StringRef key,
                         CacheEntry entry);

} // namespace switchyard::runtime::detail

#endif // SWITCHYARD_RUNTIME_ENGINE_OBJECTLOADER_H

//===- ObjectLoader.cpp - native code linked into this process ------------===//
//
// An LLJIT with an RTDyld object layer (a SectionMemoryManager per object)
// and the program's symbol resolution.
//
//===----------------------------------------------------------------------===//

#include "runtime/Engine/ObjectLoader.h"
#include "runtime/Engine/ProgramSupport.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/JITEventListener.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdlib>

using namespace switchyard::runtime::detail;

namespace {

/// With SWITCHYARD_PERF=1, LLVM's perf listener: the compiled functions'
/// names and code go to a jitdump file (jit-<pid>.dump, in $JITDUMPDIR or
/// the working directory), which `perf inject --jit` merges into a
/// profile recorded with `perf record -k 1` (docs/Performance.md).
llvm::JITEventListener *perfListener() {
  static llvm::JITEventListener *listener = [] {
    const char *enabled = std::getenv("SWITCHYARD_PERF");
    return enabled && llvm::StringRef(enabled) == "1"
               ? llvm::JITEventListener::createPerfJITEventListener()
               : nullptr;
  }();
  return listener;
}

} // namespace

LoadedCode::LoadedCode() = default;
LoadedCode::~LoadedCode() = default;

llvm::Expected<std::unique_ptr<LoadedCode>> LoadedCode::load(
    llvm::ArrayRef<std::string> objects,
    llvm::ArrayRef<llvm::StringRef> sharedLibraries,
    llvm::function_ref<llvm::orc::SymbolMap(llvm::orc::MangleAndInterner)>
        symbols,
    llvm::ArrayRef<FunctionSpec> entryPoints) {
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> machine =
      llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!machine)
    return machine.takeError();
  llvm::orc::LLJITBuilder builder;
  builder.setJITTargetMachineBuilder(std::move(*machine));
  builder.setObjectLinkingLayerCreator(
      [](llvm::orc::ExecutionSession &session)
          -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
        auto layer = std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
            session, [](const llvm::MemoryBuffer &) {
              return std::make_unique<llvm::SectionMemoryManager>();
            });
        if (llvm::JITEventListener *perf = perfListener())
          layer->registerJITEventListener(*perf);
        return layer;
      });
  llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> jit = builder.create();
  if (!jit)
    return jit.takeError();

  llvm::orc::JITDylib &dylib = (*jit)->getMainJITDylib();
  char prefix = (*jit)->getDataLayout().getGlobalPrefix();
  llvm::orc::MangleAndInterner interner((*jit)->getExecutionSession(),
                                        (*jit)->getDataLayout());
  if (llvm::Error error =
          dylib.define(llvm::orc::absoluteSymbols(symbols(interner))))
    return std::move(error);
  for (llvm::StringRef library : sharedLibraries) {
    auto generator = llvm::orc::DynamicLibrarySearchGenerator::Load(
        library.str().c_str(), prefix);
    if (!generator)
      return generator.takeError();
    dylib.addGenerator(std::move(*generator));
  }
  auto process =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
  if (!process)
    return process.takeError();
  dylib.addGenerator(std::move(*process));

  for (const std::string &object : objects)
    if (llvm::Error error = (*jit)->addObjectFile(
            llvm::MemoryBuffer::getMemBufferCopy(object, "program")))
      return std::move(error);
  std::unique_ptr<LoadedCode> loaded(new LoadedCode());
  loaded->jit = std::move(*jit);
  for (const FunctionSpec &function : entryPoints) {
    llvm::Expected<PackedFunction> packed =
        loaded->lookupPacked("_mlir_ciface_" + function.name);
    if (!packed)
      return packed.takeError();
  }
  return loaded;
}

llvm::Expected<PackedFunction>
LoadedCode::lookupPacked(llvm::StringRef name) {
  llvm::Expected<llvm::orc::ExecutorAddr> address =
      jit->lookup(("_mlir_" + name).str());
  if (!address)
    return address.takeError();
  return address->toPtr<PackedFunction>();
}

llvm::Expected<void (*)()>
LoadedCode::lookupFunction(llvm::StringRef name) {
  llvm::Expected<llvm::orc::ExecutorAddr> address = jit->lookup(name);
  if (!address)
    return address.takeError();
  return address->toPtr<void (*)()>();
}

std::optional<switchyard::runtime::CacheEntry>
switchyard::runtime::detail::loadCachedProgram(
    llvm::StringRef directory, llvm::StringRef key,
    llvm::ArrayRef<llvm::StringRef> sharedLibraries,
    llvm::function_ref<llvm::orc::SymbolMap(llvm::orc::MangleAndInterner)>
        symbols,
    std::unique_ptr<LoadedCode> &code) {
  std::optional<CacheEntry> entry = readCacheEntry(directory, key);
  if (!entry)
    return std::nullopt;
  // Every entry point resolves, or the entry is not whole.
  llvm::Expected<std::unique_ptr<LoadedCode>> loaded = LoadedCode::load(
      entry->objects, sharedLibraries, symbols, entry->functions);
  if (!loaded) {
    llvm::consumeError(loaded.takeError());
    return std::nullopt;
  }
  code = std::move(*loaded);
  return entry;
}

std::string switchyard::runtime::detail::storeProgram(llvm::StringRef directory,
                                                      llvm::StringRef key,
                                                      const CacheEntry &entry) {
  if (llvm::Error error = writeCacheEntry(directory, key, entry))
    return "not stored: " + llvm::toString(std::move(error));
  return "stored " + cacheEntryPath(directory, key);
}

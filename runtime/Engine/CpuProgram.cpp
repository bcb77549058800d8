//===- CpuProgram.cpp - compiled programs on the CPU ----------------------===//
//
// Compiles a module with the Switchyard pipeline builders (up to linalg
// through the shared runtime/Engine/ProgramSupport.h, then the CPU code
// generation pipeline and NativeCode.h's objects), and runs the linked code
// through the C interfaces (memref descriptors of the HostTensors' own
// bytes).
//
//===----------------------------------------------------------------------===//

#include "runtime/Engine/CpuProgram.h"
#include "runtime/BufferCache.h"
#include "runtime/CompileCache.h"
#include "runtime/ComputeThreads.h"
#include "runtime/Engine/NativeCode.h"
#include "runtime/Engine/ObjectLoader.h"
#include "runtime/Engine/ProgramSupport.h"

#include "lib/InitSwitchyard.h"
#include "lib/Pipelines/Pipelines.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

using namespace switchyard::runtime;
using detail::failure;
using llvm::Expected;
using llvm::StringRef;

#ifndef SWITCHYARD_C_RUNNER_UTILS
#define SWITCHYARD_C_RUNNER_UTILS ""
#endif

namespace {
/// The compiled code's `puts`: only a failing runtime check (cf.assert,
/// lowered to puts + abort; the GPU emulation's check-bounds) calls it, just
/// before aborting. It writes to stderr, which is not buffered, so that the
/// message is not lost with stdout's buffer.
extern "C" int switchyardFailedCheckMessage(const char *message) {
  std::fputs(message, stderr);
  std::fputc('\n', stderr);
  return 0;
}

/// MLIR's memrefCopy (mlir/lib/ExecutionEngine/CRunnerUtils.cpp), for builds
/// without libmlir_c_runner_utils.so (SWITCHYARD_STATIC_LLVM): copies a
/// strided memref element by element.
extern "C" void switchyardMemrefCopy(int64_t elemSize,
                                     UnrankedMemRefType<char> *srcArg,
                                     UnrankedMemRefType<char> *dstArg) {
  DynamicMemRefType<char> src(*srcArg);
  DynamicMemRefType<char> dst(*dstArg);
  int64_t rank = src.rank;
  for (int64_t axis = 0; axis < rank; ++axis)
    if (src.sizes[axis] == 0)
      return;
  char *srcPtr = src.data + src.offset * elemSize;
  char *dstPtr = dst.data + dst.offset * elemSize;
  if (rank == 0) {
    std::memcpy(dstPtr, srcPtr, elemSize);
    return;
  }
  std::vector<int64_t> indices(rank, 0), srcStrides(rank), dstStrides(rank);
  for (int64_t axis = 0; axis < rank; ++axis) {
    srcStrides[axis] = src.strides[axis] * elemSize;
    dstStrides[axis] = dst.strides[axis] * elemSize;
  }
  int64_t readIndex = 0, writeIndex = 0;
  for (;;) {
    std::memcpy(dstPtr + writeIndex, srcPtr + readIndex, elemSize);
    for (int64_t axis = rank - 1; axis >= 0; --axis) {
      int64_t newIndex = ++indices[axis];
      readIndex += srcStrides[axis];
      writeIndex += dstStrides[axis];
      if (src.sizes[axis] != newIndex)
        break;
      if (axis == 0)
        return;
      indices[axis] = 0;
      readIndex -= src.sizes[axis] * srcStrides[axis];
      writeIndex -= dst.sizes[axis] * dstStrides[axis];
    }
  }
}

/// The symbols the compiled code takes from the runtime. The compiled
/// code's malloc and free keep its large temporaries for the next call
/// (BufferCache.h).
llvm::orc::SymbolMap runtimeSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap symbols;
  auto bind = [&](StringRef name, auto *function) {
    symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(function),
                               llvm::JITSymbolFlags::Exported};
  };
  bind("malloc", &switchyardBufferAlloc);
  // LLVM may fold malloc + memset(0) into calloc: it must come from here
  // too, since free is ours.
  bind("calloc", &switchyardBufferCalloc);
  bind("aligned_alloc", &switchyardBufferAlignedAlloc);
  bind("free", &switchyardBufferFree);
  bind("puts", &switchyardFailedCheckMessage);
  bind("switchyardParallelFor", &switchyardParallelFor);
  if (StringRef(SWITCHYARD_C_RUNNER_UTILS) == "")
    bind("memrefCopy", &switchyardMemrefCopy);
  return symbols;
}

/// The shared libraries the compiled code may call into.
llvm::SmallVector<StringRef> sharedLibraries() {
  llvm::SmallVector<StringRef> libraries;
  if (StringRef(SWITCHYARD_C_RUNNER_UTILS) != "")
    libraries.push_back(SWITCHYARD_C_RUNNER_UTILS);
  return libraries;
}

} // namespace

struct CpuProgram::Impl {
  mlir::MLIRContext context;
  std::vector<FunctionSpec> functions;
  ParamTable params;
  /// The program's native code, compiled now or loaded from the compile
  /// cache.
  std::unique_ptr<detail::LoadedCode> code;
  std::string backend = "cpu";
  std::string cacheReport;

  Expected<detail::PackedFunction> lookup(StringRef name) {
    return code->lookupPacked(("_mlir_ciface_" + name).str());
  }

  /// The program stored as `key` in `directory`, or null where it cannot
  /// be used (the entry is then compiled and stored again).
  static std::unique_ptr<Impl> loadCached(StringRef directory, StringRef key);
};
/// The program stored as `key` in `directory`, or null where it cannot be
/// used (the entry is then compiled and stored again).
std::unique_ptr<CpuProgram::Impl>
CpuProgram::Impl::loadCached(StringRef directory, StringRef key) {
  auto impl = std::make_unique<Impl>();
  std::optional<CacheEntry> entry = detail::loadCachedProgram(
      directory, key, sharedLibraries(), runtimeSymbols, impl->code);
  if (!entry)
    return nullptr;
  impl->functions = std::move(entry->functions);
  impl->params = std::move(entry->params);
  impl->backend = entry->backend;
  impl->cacheReport = "hit " + cacheEntryPath(directory, key);
  return impl;
}

CpuProgram::CpuProgram() : impl(std::make_unique<Impl>()) {}
// Blocks cached for this program's calls go back to the system (another
// live program only pays fresh pages again on its next call).
CpuProgram::~CpuProgram() { bufferCacheTrim(); }

const std::vector<FunctionSpec> &CpuProgram::functions() const {
  return impl->functions;
}

const ParamTable &CpuProgram::params() const { return impl->params; }

StringRef CpuProgram::backend() const { return impl->backend; }

StringRef CpuProgram::cacheReport() const { return impl->cacheReport; }

Expected<std::unique_ptr<CpuProgram>>
CpuProgram::compileFile(StringRef path, const CompileOptions &options) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return failure(llvm::formatv("cannot read model '{0}': {1}", path,
                                 file.getError().message()));
  return compile((*file)->getBuffer(), path, options);
}

Expected<std::unique_ptr<CpuProgram>>
CpuProgram::compile(StringRef source, StringRef bufferName,
                    const CompileOptions &options) {
  static bool nativeTargetReady = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)nativeTargetReady;

  std::unique_ptr<CpuProgram> program(new CpuProgram());
  const std::optional<mlir::switchyard::GpuEmulationOptions> &emulation =
      options.emulateGpu;
  CompileOptions resolved = detail::resolveFor(
      options, emulation ? mlir::switchyard::Target::Gpu
                         : mlir::switchyard::Target::Cpu);
  const detail::CpuTarget target{options.cpu, options.cpuFeatures};
  if (llvm::Error error = detail::checkCpuTarget(target))
    return std::move(error);
  std::string key;
  if (!options.cacheDirectory.empty()) {
    if (std::optional<std::string> description = detail::describeCompilation(
            source, bufferName, resolved,
            detail::describeHostCpu() + "\ntarget CPU '" + target.cpu +
                "' features '" + target.features + "'"))
      key = cacheKey(*description);
    if (!key.empty())
      if (std::unique_ptr<Impl> cached =
              Impl::loadCached(options.cacheDirectory, key)) {
        program->impl = std::move(cached);
        return program;
      }
  }
  mlir::MLIRContext &context = program->impl->context;
  mlir::DialectRegistry registry;
  mlir::switchyard::registerDialects(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();

  // The matmul kernels' register tile for the target's vector registers
  // (the compile cache's key includes the host's and the target's CPU).
  auto [bits, registers] = detail::vectorRegisters(target);
  mlir::switchyard::CpuKernelTile tile =
      mlir::switchyard::cpuKernelTile(bits, registers);

  // Stages 1-4, shared with the GPU backend.
  detail::Compilation compilation(context, source, bufferName);
  if (llvm::Error error = compilation.lowerToLinalg(
          resolved, program->impl->params, program->impl->functions,
          emulation && emulation->usesTensorCores(),
          /*scatterEmbeddingGradient=*/!emulation,
          // The emulated GPU's fused ops are row kernels.
          emulation ? mlir::switchyard::FusedKernelForms()
                    : mlir::switchyard::FusedKernelForms::cpu(
                          tile.rows, resolved.roundContractionOperands)))
    return std::move(error);

  // Stages 5-6: native code.
  mlir::PassManager codegen(&context);
  if (emulation) {
    mlir::switchyard::buildGpuEmulationCodegenPipeline(codegen, *emulation);
    program->impl->backend = "gpu-emulation";
  } else {
    mlir::switchyard::buildCpuCodegenPipeline(
        codegen, options.roundContractionOperands, tile);
  }
  if (llvm::Error error = compilation.run(
          codegen, emulation ? "GPU emulation code generation"
                             : "CPU code generation"))
    return std::move(error);

  // Native code for this machine, linked into this process.
  detail::NativeCodeOptions native;
  native.target = target;
  native.optLevel = options.optLevel;
  // The GPU emulation's loops run in order (its kernels' threads share
  // memory); the CPU code's parallel loops on the compute threads.
  native.parallelLoops = !emulation;
  Expected<std::vector<std::string>> objects =
      detail::generateObjects(compilation.module(), native);
  if (!objects)
    return failure(llvm::formatv("{0}: JIT compilation failed: {1}\n{2}",
                                 bufferName,
                                 llvm::toString(objects.takeError()),
                                 compilation.diagnostics()));
  Expected<std::unique_ptr<detail::LoadedCode>> code =
      detail::LoadedCode::load(*objects, sharedLibraries(), runtimeSymbols,
                               program->impl->functions);
  if (!code)
    return failure(llvm::formatv("{0}: linking the compiled code failed: {1}",
                                 bufferName, llvm::toString(code.takeError())));
  program->impl->code = std::move(*code);
  if (!key.empty())
    program->impl->cacheReport = detail::storeProgram(
        options.cacheDirectory, key,
        CacheEntry{program->impl->functions, program->impl->params,
                   program->impl->backend, std::move(*objects), {}, {}});
  return program;
}

Expected<std::vector<HostTensor>>
CpuProgram::call(StringRef name, llvm::ArrayRef<const HostTensor *> arguments) {
  Expected<const FunctionSpec *> function =
      detail::checkCall(impl->functions, name, arguments);
  if (!function)
    return function.takeError();

  // The generated code reads the HostTensors' bytes in place.
  std::vector<std::vector<int64_t>> descriptors;
  std::set<const void *> argumentBuffers;
  for (const HostTensor *tensor : arguments) {
    argumentBuffers.insert(tensor->bytes.data());
    descriptors.push_back(
        detail::denseDescriptor(tensor->bytes.data(), tensor->shape));
  }
  Expected<std::vector<detail::ResultDescriptor>> results =
      [&]() -> Expected<std::vector<detail::ResultDescriptor>> {
        Expected<detail::PackedFunction> entry = impl->lookup(name);
        if (!entry)
          return failure(llvm::formatv("calling @{0}: {1}", name,
                                       llvm::toString(entry.takeError())));
        return detail::invoke(*entry, **function, descriptors);
      }();
  if (!results)
    return results.takeError();

  // A dense result in a buffer of its own becomes its tensor's bytes as it
  // is (the buffer cache allocated it: TensorBytes frees it there); the
  // others are copied out, following their strides, and their buffers freed
  // once all are copied, unless they are an argument's.
  std::vector<HostTensor> outputs;
  std::set<void *> taken, toFree;
  for (auto [spec, result] : llvm::zip((*function)->results, *results)) {
    uint8_t *first =
        result.aligned + result.offset * int64_t(sizeOf(spec.type));
    bool own = result.allocated && !argumentBuffers.count(result.allocated);
    if (own && result.isDense() && taken.insert(result.allocated).second) {
      HostTensor output;
      output.type = spec.type;
      output.shape = result.sizes;
      output.bytes = TensorBytes::adopt(
          result.allocated, first,
          size_t(output.numElements()) * sizeOf(spec.type));
      outputs.push_back(std::move(output));
      continue;
    }
    outputs.push_back(detail::gather(result, spec.type, first));
    if (own)
      toFree.insert(result.allocated);
  }
  for (void *buffer : toFree)
    if (!taken.count(buffer))
      switchyardBufferFree(buffer);
  return outputs;
}

//===- GpuProgram.cpp - compiled programs on an NVIDIA GPU ----------------===//
//
// Compiles a module up to linalg with the code the CPU backend uses
// (runtime/Engine/ProgramSupport.h), then with buildGpuCodegenPipeline;
// JIT-compiles the host code (NativeCode.h), whose `mgpu*` calls resolve to
// the runtime's driver layer (runtime/CudaDriver.h). Calls move arguments
// and results between HostTensors and device memory.
//
//===----------------------------------------------------------------------===//

#include "runtime/Engine/GpuProgram.h"
#include "runtime/CompileCache.h"
#include "runtime/CudaDriver.h"
#include "runtime/Engine/CallGraphs.h"
#include "runtime/Engine/NativeCode.h"
#include "runtime/Engine/ObjectLoader.h"
#include "runtime/Engine/ProgramSupport.h"
#include "runtime/Nccl.h"

#include "lib/InitSwitchyard.h"
#include "lib/Pipelines/Pipelines.h"
#include "lib/Target/LLVMIR/JitPreparation.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"

#include <cstdlib>
#include "llvm/Target/TargetMachine.h"

#include <set>

using namespace switchyard::runtime;
using detail::failure;
using llvm::Expected;
using llvm::StringRef;

namespace cuda = switchyard::runtime::cuda;

std::string switchyard::runtime::defaultChip(int computeCapability) {
  return "sm_" + std::to_string(computeCapability);
}

struct GpuProgram::Impl {
  mlir::MLIRContext context;
  std::vector<FunctionSpec> functions;
  ParamTable params;
  std::string chip;
  std::string cacheReport;
  /// The host code: JIT-compiled, or its object loaded from the compile
  /// cache.
  std::unique_ptr<detail::LoadedCode> code;
  /// The host code's constructors (kernel module loads), run before the
  /// first call, and destructors (unloads), run when the program goes.
  mlir::switchyard::Structors structors;
  bool constructed = false;
  /// The stream argument and result copies run on; created on first call.
  cuda::Stream stream = nullptr;
  /// The calls replayed as CUDA graphs (SWITCHYARD_CUDA_GRAPHS=1).
  CallGraphs graphs;

  /// A function of the host code without arguments.
  Expected<void (*)()> lookupFunction(StringRef name) {
    return code->lookupFunction(name);
  }

  /// Runs the host code's constructors once.
  llvm::Error construct() {
    if (constructed)
      return llvm::Error::success();
    constructed = true;
    for (const std::string &name : structors.constructors) {
      Expected<void (*)()> function = lookupFunction(name);
      if (!function)
        return function.takeError();
      (*function)();
    }
    return llvm::Error::success();
  }
};

GpuProgram::GpuProgram() : impl(std::make_unique<Impl>()) {}

GpuProgram::~GpuProgram() {
  // The host code's destructors unload the kernel modules that its
  // constructors loaded at the first call (mgpuModuleUnload); an error they
  // defer is not this program's caller's business.
  bool called = impl->stream != nullptr;
  impl->graphs.clear();
  if (impl->constructed)
    for (const std::string &name : impl->structors.destructors) {
      Expected<void (*)()> function = impl->lookupFunction(name);
      if (function)
        (*function)();
      else
        llvm::consumeError(function.takeError());
    }
  impl->code.reset();
  if (called) {
    if (Expected<cuda::Driver &> driver = cuda::Driver::get())
      llvm::consumeError(driver->destroyStream(impl->stream));
    else
      llvm::consumeError(driver.takeError());
  }
  llvm::consumeError(cuda::takeDeferredError());
}

const std::vector<FunctionSpec> &GpuProgram::functions() const {
  return impl->functions;
}

const ParamTable &GpuProgram::params() const { return impl->params; }

StringRef GpuProgram::chip() const { return impl->chip; }

StringRef GpuProgram::cacheReport() const { return impl->cacheReport; }

Expected<std::unique_ptr<GpuProgram>>
GpuProgram::compileFile(StringRef path, const CompileOptions &options,
                        const GpuTargetOptions &gpuOptions) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return failure(llvm::formatv("cannot read model '{0}': {1}", path,
                                 file.getError().message()));
  return compile((*file)->getBuffer(), path, options, gpuOptions);
}

namespace {

/// Checks that every `mgpu*` function the host code declares is one the
/// runtime provides, with the type it implements: a mismatch would be a
/// crash at the first call, on a GPU machine; this finds it at compile time
/// on any machine.
llvm::Error checkWrapperDeclarations(const llvm::Module &module) {
  for (const llvm::Function &function : module.functions()) {
    if (!function.isDeclaration() || !function.getName().starts_with("mgpu"))
      continue;
    StringRef expected = cuda::mgpuLlvmType(function.getName());
    std::string found;
    llvm::raw_string_ostream(found) << *function.getFunctionType();
    if (expected.empty())
      return failure(llvm::formatv(
          "the generated host code calls {0} ({1}), which the runtime's CUDA "
          "driver layer does not provide",
          function.getName(), found));
    if (expected != found)
      return failure(llvm::formatv(
          "the generated host code declares {0} as '{1}'; the runtime "
          "implements '{2}'",
          function.getName(), found, expected));
  }
  return llvm::Error::success();
}

/// What GPU code depends on beyond the model and the compile options, for
/// the compile cache's key: every target option as resolved (the chip, the
/// toolkit root), and the toolkit's ptxas by size and modification time.
std::string describeTarget(const GpuTargetOptions &target) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "gpu host object";
  GpuTargetOptions resolved = target;
  resolved.chip = target.chipOrDefault().str();
  resolved.toolkit = target.toolkitDir();
  detail::OptionPrinter printer{os, ", "};
  resolved.bindOptions(printer);
  llvm::SmallString<256> ptxas(resolved.toolkit);
  llvm::sys::path::append(ptxas, "bin", "ptxas");
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(ptxas, status))
    os << ", ptxas of " << status.getSize() << " bytes modified "
       << status.getLastModificationTime().time_since_epoch().count();
  return text;
}

} // namespace

Expected<std::unique_ptr<GpuProgram>>
GpuProgram::compile(StringRef source, StringRef bufferName,
                    const CompileOptions &options,
                    const GpuTargetOptions &gpuOptions) {
  static bool nativeTargetReady = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)nativeTargetReady;

  std::unique_ptr<GpuProgram> program(new GpuProgram());
  Impl &impl = *program->impl;
  GpuTargetOptions target = gpuOptions;
  if (target.chip.empty() && cuda::Driver::available()) {
    // The device's chip where there is one; compiling needs no GPU.
    if (Expected<cuda::Driver &> driver = cuda::Driver::get())
      target.chip = defaultChip(driver->device().computeCapability);
    else
      llvm::consumeError(driver.takeError());
  }
  impl.chip = target.chipOrDefault().str();

  mlir::MLIRContext &context = impl.context;
  mlir::DialectRegistry registry;
  mlir::switchyard::registerDialects(registry);
  mlir::switchyard::registerGpuDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();

  // The compile cache keeps the host code's object (the kernels are in it,
  // as the constants its constructors load) and the names of its
  // constructors and destructors: a hit skips the compiler, ptxas and the
  // JIT.
  CompileOptions resolved =
      detail::resolveFor(options, mlir::switchyard::Target::Gpu);
  std::string key;
  if (!options.cacheDirectory.empty())
    if (std::optional<std::string> description = detail::describeCompilation(
            source, bufferName, resolved, describeTarget(target)))
      key = cacheKey(*description);
  auto mgpuSymbols = [](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    for (const auto &[name, address] : cuda::mgpuSymbols())
      symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                 llvm::JITSymbolFlags::Exported};
    return symbols;
  };
  if (!key.empty())
    if (std::optional<CacheEntry> entry = detail::loadCachedProgram(
            options.cacheDirectory, key, {}, mgpuSymbols, impl.code);
        entry && entry->backend == "gpu") {
      impl.functions = std::move(entry->functions);
      impl.params = std::move(entry->params);
      impl.structors.constructors = std::move(entry->constructors);
      impl.structors.destructors = std::move(entry->destructors);
      impl.cacheReport = "hit " + cacheEntryPath(options.cacheDirectory, key);
      return program;
    }
  impl.code.reset(); // Another backend's entry under this key.

  detail::Compilation compilation(context, source, bufferName);
  // Stages 1-4, shared with the CPU backend; the grouped formulation is
  // the padded one (no host reads).
  if (llvm::Error error = compilation.lowerToLinalg(
          resolved, impl.params, impl.functions, target.usesTensorCores()))
    return std::move(error);

  // Stages 5-6: kernels for the chip, host code in the LLVM dialect.
  mlir::PassManager codegen(&context);
  mlir::switchyard::buildGpuCodegenPipeline(codegen, target);
  if (llvm::Error error = compilation.run(
          codegen,
          llvm::formatv("GPU code generation for {0}", impl.chip).str()))
    return std::move(error);
  mlir::ModuleOp module = compilation.module();

  // The host code, JIT-compiled; its kernel launches and device allocations
  // call the runtime's mgpu* wrappers. Its constructors and destructors
  // (the kernel modules' loads and unloads) are run by this program, as
  // for an object from the cache.
  detail::NativeCodeOptions native;
  native.optLevel = options.optLevel;
  native.afterTranslation = [&](llvm::Module &llvmModule) -> llvm::Error {
    if (llvm::Error error = checkWrapperDeclarations(llvmModule))
      return error;
    impl.structors = mlir::switchyard::detachStructors(llvmModule);
    return llvm::Error::success();
  };
  Expected<std::vector<std::string>> objects =
      detail::generateObjects(module, native);
  if (!objects)
    return failure(llvm::formatv("{0}: JIT compilation of the GPU host code "
                                 "failed: {1}\n{2}",
                                 bufferName,
                                 llvm::toString(objects.takeError()),
                                 compilation.diagnostics()));
  Expected<std::unique_ptr<detail::LoadedCode>> code =
      detail::LoadedCode::load(*objects, {}, mgpuSymbols, impl.functions);
  if (!code)
    return failure(llvm::formatv("{0}: linking the GPU host code failed: {1}",
                                 bufferName, llvm::toString(code.takeError())));
  impl.code = std::move(*code);
  if (!key.empty())
    impl.cacheReport = detail::storeProgram(
        options.cacheDirectory, key,
        CacheEntry{impl.functions, impl.params, "gpu", std::move(*objects),
                   impl.structors.constructors, impl.structors.destructors});
  return program;
}

namespace {

/// A tensor in device memory from the driver's pool, which it returns there
/// when destroyed. The pool belongs to the process-wide driver, so a handle
/// may outlive the program that made it.
///
/// A handle lent from the outputs of a CUDA graph (CallGraphs) holds them
/// instead: the memory goes back when the graph and its handles are gone,
/// and the graph is not replayed while the handle lives.
class GpuDeviceTensor final : public DeviceTensor {
public:
  GpuDeviceTensor(ElementType type, std::vector<int64_t> shape,
                  std::string name, cuda::DevicePtr pointer,
                  std::shared_ptr<GraphOutputs> lender = nullptr)
      : DeviceTensor(type, std::move(shape), std::move(name)),
        pointer(pointer), lender(std::move(lender)) {}
  ~GpuDeviceTensor() override {
    if (lender)
      return;
    // A handle exists only where the driver did (it came from it).
    if (Expected<cuda::Driver &> driver = cuda::Driver::get())
      driver->release(pointer);
    else
      llvm::consumeError(driver.takeError());
  }
  StringRef backend() const override { return "gpu"; }

  const cuda::DevicePtr pointer;

private:
  std::shared_ptr<GraphOutputs> lender;
};

/// Whether calls take their temporaries from memory plans
/// (cuda::Driver::beginPlannedCall): SWITCHYARD_MEMORY_PLAN=1 in the
/// environment.
bool memoryPlansEnabled() {
  const char *value = std::getenv("SWITCHYARD_MEMORY_PLAN");
  return value && llvm::StringRef(value) == "1";
}

/// Bytes of a dense tensor of `type` and `shape`.
uint64_t denseBytes(ElementType type, llvm::ArrayRef<int64_t> shape) {
  uint64_t count = 1;
  for (int64_t size : shape)
    count *= uint64_t(std::max<int64_t>(size, 0));
  return count * sizeOf(type);
}

/// Whether `result` views its buffer densely in row-major order from the
/// buffer's start: then the buffer itself can become a handle.
bool isWholeDenseBuffer(const detail::ResultDescriptor &result) {
  return result.offset == 0 && result.aligned == result.allocated &&
         result.isDense();
}

} // namespace

Expected<std::unique_ptr<DeviceTensor>>
GpuProgram::upload(const HostTensor &tensor) {
  Expected<cuda::Driver &> driver = cuda::Driver::get();
  if (!driver)
    return failure(llvm::formatv("uploading '{0}' to the GPU: {1}",
                                 tensor.name,
                                 llvm::toString(driver.takeError())));
  Expected<cuda::DevicePtr> buffer =
      driver->allocate(std::max<uint64_t>(tensor.bytes.size(), 1));
  if (!buffer)
    return buffer.takeError();
  auto handle = std::make_unique<GpuDeviceTensor>(tensor.type, tensor.shape,
                                                  tensor.name, *buffer);
  if (!tensor.bytes.empty()) {
    // The null stream: synchronous with respect to the host buffer.
    if (llvm::Error error = driver->copyToDevice(
            *buffer, tensor.bytes.data(), tensor.bytes.size(), nullptr))
      return std::move(error);
    if (llvm::Error error = driver->synchronize(nullptr))
      return std::move(error);
  }
  return std::unique_ptr<DeviceTensor>(std::move(handle));
}

llvm::Error GpuProgram::allReduceMean(llvm::ArrayRef<DeviceTensor *> tensors,
                                      NcclGroup &group) {
  std::vector<DeviceFloats> buffers;
  for (DeviceTensor *tensor : tensors) {
    if (tensor->backend() != backend() || tensor->type() != ElementType::f32)
      return failure(llvm::formatv(
          "averaging tensor '{0}' across the ranks: NCCL takes the GPU's f32 "
          "tensors, not {1}'s {2}",
          tensor->name(), tensor->backend(), toString(tensor->type())));
    buffers.push_back({static_cast<GpuDeviceTensor *>(tensor)->pointer,
                       size_t(tensor->numElements())});
  }
  Expected<cuda::Driver &> driver = cuda::Driver::get();
  if (!driver)
    return driver.takeError();
  Expected<cuda::Stream> stream = driver->createStream();
  if (!stream)
    return stream.takeError();
  llvm::Error error = group.allReduceMean(buffers, *stream);
  if (!error)
    error = driver->synchronize(*stream);
  return llvm::joinErrors(std::move(error), driver->destroyStream(*stream));
}

Expected<HostTensor> GpuProgram::download(const DeviceTensor &tensor) {
  if (tensor.backend() != backend())
    return failure(llvm::formatv("tensor '{0}' is held by the {1} backend, "
                                 "not by the GPU",
                                 tensor.name(), tensor.backend()));
  const auto &handle = static_cast<const GpuDeviceTensor &>(tensor);
  Expected<cuda::Driver &> driver = cuda::Driver::get();
  if (!driver)
    return driver.takeError();
  HostTensor host;
  host.name = tensor.name();
  host.type = tensor.type();
  host.shape.assign(tensor.shape().begin(), tensor.shape().end());
  host.bytes.resize(denseBytes(host.type, host.shape));
  if (!host.bytes.empty()) {
    if (llvm::Error error = driver->copyToHost(
            host.bytes.data(), handle.pointer, host.bytes.size(), nullptr))
      return std::move(error);
    if (llvm::Error error = driver->synchronize(nullptr))
      return std::move(error);
  }
  return host;
}

Expected<std::vector<HostTensor>>
GpuProgram::call(StringRef name, llvm::ArrayRef<const HostTensor *> arguments) {
  std::vector<CallArgument> wrapped(arguments.begin(), arguments.end());
  Expected<std::vector<CallResult>> results =
      callResident(name, wrapped, /*keep=*/{});
  if (!results)
    return results.takeError();
  std::vector<HostTensor> outputs;
  for (CallResult &result : *results)
    outputs.push_back(std::move(result.host));
  return outputs;
}

namespace {
/// The results of a call whose host code (or graph) ran on `stream`:
/// handles for the kept ones, host tensors for the others. `owned`: the
/// result buffers the caller may take (the others are released);
/// `lender`: the graph outputs that kept results may borrow.
Expected<std::vector<CallResult>> collectResults(
    GpuProgram &program, cuda::Stream stream, cuda::Driver &driver,
    StringRef name, const FunctionSpec &function,
    const std::vector<detail::ResultDescriptor> &results,
    llvm::ArrayRef<bool> keep, std::set<void *> owned,
    const std::shared_ptr<GraphOutputs> &lender) {
  // Buffers of a graph's outputs, each lent to at most one handle.
  std::set<void *> lendable;
  if (lender)
    for (cuda::DevicePtr buffer : lender->buffers)
      lendable.insert(reinterpret_cast<void *>(buffer));
  auto releaseOwned = [&] {
    for (void *pointer : owned)
      driver.release(reinterpret_cast<cuda::DevicePtr>(pointer));
    owned.clear();
  };
  auto fail = [&](llvm::Error error) -> llvm::Error {
    llvm::consumeError(driver.synchronize(stream));
    releaseOwned();
    return failure(llvm::formatv("calling @{0} on the GPU: {1}", name,
                                 llvm::toString(std::move(error))));
  };

  // The generated code synchronised its stream before returning (a graph's
  // replay is ordered before the copies below on the same stream). Kept
  // results become handles: a result that is a whole dense buffer of its
  // own is adopted as it is (lent, where a graph owns it); any other (a
  // view, an argument's buffer, a buffer another result took) is copied
  // into a new buffer first. Host results: copy each one's whole view out,
  // then gather it densely.
  std::vector<CallResult> outputs(results.size());
  std::vector<std::vector<uint8_t>> staging(results.size());
  for (auto [index, spec, result] : llvm::enumerate(function.results, results)) {
    size_t elementSize = sizeOf(spec.type);
    int64_t span = result.spanElements();
    if (span > 0 && !result.aligned)
      return fail(failure(
          llvm::formatv("result #{0} is a null device pointer", index)));
    bool kept = index < keep.size() && keep[index];
    if (kept && isWholeDenseBuffer(result)) {
      auto pointer = reinterpret_cast<cuda::DevicePtr>(result.allocated);
      if (owned.erase(result.allocated)) {
        outputs[index].device = std::make_unique<GpuDeviceTensor>(
            spec.type, result.sizes, "", pointer);
        continue;
      }
      if (lendable.erase(result.allocated)) {
        outputs[index].device = std::make_unique<GpuDeviceTensor>(
            spec.type, result.sizes, "", pointer, lender);
        continue;
      }
    }
    auto first = reinterpret_cast<cuda::DevicePtr>(result.aligned) +
                 uint64_t(result.offset) * elementSize;
    if (kept && result.isDense()) {
      uint64_t bytes = denseBytes(spec.type, result.sizes);
      Expected<cuda::DevicePtr> buffer =
          driver.allocate(std::max<uint64_t>(bytes, 1));
      if (!buffer)
        return fail(buffer.takeError());
      outputs[index].device = std::make_unique<GpuDeviceTensor>(
          spec.type, result.sizes, "", *buffer);
      if (bytes > 0)
        if (llvm::Error error =
                driver.copyOnDevice(*buffer, first, bytes, stream))
          return fail(std::move(error));
      continue;
    }
    // Host results, and kept strided views (gathered on the host, uploaded
    // below: generated code does not return those for a train step).
    staging[index].resize(size_t(std::max<int64_t>(span, 0)) * elementSize);
    if (span > 0)
      if (llvm::Error error =
              driver.copyToHost(staging[index].data(), first,
                                staging[index].size(), stream))
        return fail(std::move(error));
  }
  if (llvm::Error error = driver.synchronize(stream))
    return fail(std::move(error));
  for (auto [index, spec, result] : llvm::enumerate(function.results, results)) {
    if (outputs[index].device)
      continue;
    HostTensor host = detail::gather(result, spec.type, staging[index].data());
    if (index < keep.size() && keep[index]) {
      Expected<std::unique_ptr<DeviceTensor>> handle = program.upload(host);
      if (!handle)
        return fail(handle.takeError());
      outputs[index].device = std::move(*handle);
    } else {
      outputs[index].host = std::move(host);
    }
  }
  releaseOwned();
  return outputs;
}

} // namespace

Expected<std::vector<CallResult>>
GpuProgram::callResident(StringRef name,
                         llvm::ArrayRef<CallArgument> arguments,
                         llvm::ArrayRef<bool> keep) {
  Expected<const FunctionSpec *> checked =
      detail::checkCall(impl->functions, name, arguments);
  if (!checked)
    return checked.takeError();
  const FunctionSpec &function = **checked;
  for (const CallArgument &argument : arguments)
    if (argument.device && argument.device->backend() != backend())
      return failure(llvm::formatv(
          "calling @{0} on the GPU: tensor '{1}' is held by the {2} backend",
          name, argument.device->name(), argument.device->backend()));

  // Nothing runs without a driver and a device: the first call would load
  // the kernels (the host code's global constructors) and launch them.
  Expected<cuda::Driver &> got = cuda::Driver::get();
  if (!got)
    return failure(llvm::formatv("calling @{0} on the GPU: {1}", name,
                                 llvm::toString(got.takeError())));
  cuda::Driver &driver = *got;
  if (!impl->stream) {
    Expected<cuda::Stream> stream = driver.createStream();
    if (!stream)
      return failure(llvm::formatv("calling @{0} on the GPU: {1}", name,
                                   llvm::toString(stream.takeError())));
    impl->stream = *stream;
  }
  // What a wrapper deferred outside any call (a module unload at a
  // program's destruction) is not this call's error.
  llvm::consumeError(cuda::takeDeferredError());
  // The host code's constructors load the kernel modules (mgpuModuleLoad);
  // they run once, here, with the driver in place. A module that does not
  // load is this call's error.
  llvm::Error constructed = impl->construct();
  if (!constructed)
    constructed = cuda::takeDeferredError();
  if (constructed)
    return failure(llvm::formatv("calling @{0} on the GPU: loading the "
                                 "kernels: {1}",
                                 name, llvm::toString(std::move(constructed))));
  Expected<detail::PackedFunction> entry =
      impl->code->lookupPacked("_mlir_ciface_" + name.str());
  if (!entry)
    return failure(llvm::formatv("calling @{0} on the GPU: {1}", name,
                                 llvm::toString(entry.takeError())));

  // With memory plans on, the call's temporaries come from its plan's
  // arena once a first call with these shapes recorded them; graphs need
  // them.
  bool graphs = cudaGraphsEnabled();
  std::string planKey;
  if (graphs || memoryPlansEnabled()) {
    llvm::raw_string_ostream key(planKey);
    key << name;
    for (const CallArgument &argument : arguments) {
      key << ';';
      llvm::interleave(argument.device ? argument.device->shape()
                                       : llvm::ArrayRef<int64_t>(
                                             argument.host->shape),
                       key, "x");
    }
  }
  auto invoke = [&](std::vector<std::vector<int64_t>> &descriptors) {
    return detail::invoke(*entry, function, descriptors);
  };

  if (graphs) {
    std::vector<CallGraphs::Argument> staged;
    for (const CallArgument &argument : arguments) {
      CallGraphs::Argument &next = staged.emplace_back();
      if (argument.device) {
        const auto &handle =
            static_cast<const GpuDeviceTensor &>(*argument.device);
        next.device = handle.pointer;
        next.shape.assign(handle.shape().begin(), handle.shape().end());
        next.bytes = denseBytes(handle.type(), next.shape);
      } else {
        next.host = argument.host->bytes.data();
        next.bytes = argument.host->bytes.size();
        next.shape = argument.host->shape;
      }
    }
    if (std::optional<Expected<CallGraphs::Replayed>> replayed =
            impl->graphs.call(driver, planKey, staged, impl->stream,
                              invoke)) {
      if (!*replayed) {
        llvm::consumeError(driver.synchronize(impl->stream));
        return failure(llvm::formatv("calling @{0} on the GPU: {1}", name,
                                     llvm::toString(replayed->takeError())));
      }
      return collectResults(*this, impl->stream, driver, name, function,
                            (*replayed)->results, keep, /*owned=*/{},
                            (*replayed)->outputs);
    }
  }

  // Device copies of the host arguments, returned to the pool on every
  // path; handles stay their owners'.
  std::vector<cuda::DevicePtr> argumentBuffers;
  auto fail = [&](llvm::Error error) -> llvm::Error {
    // Let the device finish with the buffers before they are reused.
    llvm::consumeError(driver.synchronize(impl->stream));
    for (cuda::DevicePtr pointer : argumentBuffers)
      driver.release(pointer);
    return failure(llvm::formatv("calling @{0} on the GPU: {1}", name,
                                 llvm::toString(std::move(error))));
  };

  std::vector<std::vector<int64_t>> descriptors;
  // Every buffer an argument lives in: a result in one of them is not the
  // caller's to free.
  std::set<void *> argumentPointers;
  for (const CallArgument &argument : arguments) {
    if (argument.device) {
      const auto &handle = static_cast<const GpuDeviceTensor &>(*argument.device);
      argumentPointers.insert(reinterpret_cast<void *>(handle.pointer));
      descriptors.push_back(detail::denseDescriptor(
          reinterpret_cast<const void *>(handle.pointer), handle.shape()));
      continue;
    }
    const HostTensor *tensor = argument.host;
    Expected<cuda::DevicePtr> buffer =
        driver.allocate(std::max<uint64_t>(tensor->bytes.size(), 1));
    if (!buffer)
      return fail(buffer.takeError());
    argumentBuffers.push_back(*buffer);
    argumentPointers.insert(reinterpret_cast<void *>(*buffer));
    if (!tensor->bytes.empty())
      if (llvm::Error error =
              driver.copyToDevice(*buffer, tensor->bytes.data(),
                                  tensor->bytes.size(), impl->stream))
        return fail(std::move(error));
    descriptors.push_back(detail::denseDescriptor(
        reinterpret_cast<const void *>(*buffer), tensor->shape));
  }
  // The generated code runs on a stream of its own (non-blocking, like
  // ours): the arguments must be in place first.
  if (llvm::Error error = driver.synchronize(impl->stream))
    return fail(std::move(error));

  if (!planKey.empty())
    driver.beginPlannedCall(planKey);
  Expected<std::vector<detail::ResultDescriptor>> results = invoke(descriptors);
  if (!planKey.empty())
    driver.endPlannedCall();
  if (!results)
    return fail(results.takeError());
  // Results are device buffers from mgpuMemAlloc that the caller owns,
  // unless one is an argument's buffer (a function returning its argument).
  std::set<void *> resultBuffers;
  for (const detail::ResultDescriptor &result : *results)
    if (result.allocated && !argumentPointers.count(result.allocated))
      resultBuffers.insert(result.allocated);
  // The wrappers cannot report errors to generated code: they keep them.
  if (llvm::Error error = cuda::takeDeferredError()) {
    for (void *pointer : resultBuffers)
      driver.release(reinterpret_cast<cuda::DevicePtr>(pointer));
    return fail(std::move(error));
  }
  Expected<std::vector<CallResult>> outputs = collectResults(
      *this, impl->stream, driver, name, function, *results, keep,
      std::move(resultBuffers), /*lender=*/nullptr);
  for (cuda::DevicePtr pointer : argumentBuffers)
    driver.release(pointer);
  return outputs;
}

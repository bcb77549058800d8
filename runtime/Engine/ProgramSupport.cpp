//===- ProgramSupport.cpp - what every backend's Program shares -----------===//
//
// The front end and lowering to linalg with the signatures and argument
// roles they leave, call-argument checks, and memref descriptors: one copy,
// used by CpuProgram and GpuProgram.
//
//===----------------------------------------------------------------------===//

#include "runtime/Engine/ProgramSupport.h"
#include "runtime/BufferCache.h"

#include "dialect/Lm/IR/LmOps.h"
#include "lib/Conversion/Passes.h"
#include "lib/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cassert>
#include <cstring>

using namespace switchyard::runtime;
using namespace switchyard::runtime::detail;
using llvm::Expected;
using llvm::StringRef;

Program::~Program() = default;

const FunctionSpec *Program::lookup(StringRef name) const {
  for (const FunctionSpec &function : functions())
    if (function.name == name)
      return &function;
  return nullptr;
}

CompileOptions detail::resolveFor(CompileOptions options,
                                  mlir::switchyard::Target target) {
  if (!options.fusion)
    options.fusion = mlir::switchyard::FusionOptions::targetDefault(target);
  if (target == mlir::switchyard::Target::Gpu &&
      options.fusion->groupedExperts && options.groupedTileRows == 0)
    options.groupedTileRows = mlir::switchyard::kGpuGroupedTileRows;
  return options;
}

llvm::Error detail::failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

namespace {

/// The runtime element type of an MLIR element type.
std::optional<ElementType> toElementType(mlir::Type type) {
  if (type.isF32())
    return ElementType::f32;
  if (type.isF16())
    return ElementType::f16;
  if (type.isBF16())
    return ElementType::bf16;
  if (type.isF64())
    return ElementType::f64;
  if (type.isSignlessInteger(32))
    return ElementType::i32;
  if (type.isSignlessInteger(64))
    return ElementType::i64;
  if (type.isSignlessInteger(8))
    return ElementType::u8;
  if (type.isSignlessInteger(1))
    return ElementType::bool_;
  return std::nullopt;
}

std::string describe(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

Expected<TensorSpec> toTensorSpec(mlir::Type type, StringRef where) {
  auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
  std::optional<ElementType> element =
      tensor ? toElementType(tensor.getElementType()) : std::nullopt;
  if (!element)
    return failure(llvm::formatv("{0} has type {1}; the runtime passes "
                                 "ranked tensors of f32, f16, bf16, f64, i64, "
                                 "i32, i8 or i1 only",
                                 where, describe(type)));
  TensorSpec spec;
  spec.type = *element;
  for (int64_t size : tensor.getShape())
    spec.shape.push_back(mlir::ShapedType::isDynamic(size) ? -1 : size);
  return spec;
}

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + (shape[i] < 0 ? std::string("?")
                                            : std::to_string(shape[i]));
  return text + "]";
}

} // namespace

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

Compilation::Compilation(mlir::MLIRContext &context, StringRef source,
                         StringRef bufferName)
    : context(context), name(bufferName.str()),
      diagnosticStream(diagnosticText) {
  sources.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, bufferName), llvm::SMLoc());
  handler = std::make_unique<mlir::SourceMgrDiagnosticHandler>(
      sources, &context, diagnosticStream);
}

Compilation::~Compilation() = default;

llvm::Error Compilation::stageFailed(StringRef stage) const {
  return failure(
      llvm::formatv("{0}: {1} failed\n{2}", name, stage, diagnosticText));
}

namespace {
/// `--verify-each` in every tool that links the runtime.
llvm::cl::opt<bool> verifyEachPass(
    "verify-each",
    llvm::cl::desc("Verify the IR after every pass of the compilation, as "
                   "mlir-opt does, instead of after each stage: names the "
                   "pass that broke it, for about 15% more compile time"),
    llvm::cl::init(false));
} // namespace

llvm::Error Compilation::run(mlir::PassManager &pm, StringRef stage) {
  // The tool's --mlir-print-ir-*, --mlir-timing, ..., where it registers
  // them (applyPassManagerCLOptions fails where it does not).
  static const bool toolHasOptions =
      llvm::cl::getRegisteredOptions().count("mlir-print-ir-after-all") != 0;
  if (toolHasOptions) {
    if (failed(mlir::applyPassManagerCLOptions(pm)))
      return stageFailed(stage);
    mlir::applyDefaultTimingPassManagerCLOptions(pm);
  }
  // The verifier after every pass is a noticeable share of a large model's
  // compile (docs/Performance.md, "Compile times"); once per stage still
  // stops invalid IR before the next stage.
  pm.enableVerifier(verifyEachPass);
  if (failed(pm.run(*moduleOp)) ||
      (!verifyEachPass && failed(mlir::verify(*moduleOp))))
    return stageFailed(stage);
  return llvm::Error::success();
}

llvm::Error
Compilation::lowerToLinalg(const CompileOptions &options, ParamTable &params,
                           std::vector<FunctionSpec> &functions,
                           bool flashAttentionKernel,
                           bool scatterEmbeddingGradient,
                           mlir::switchyard::FusedKernelForms fusedForms) {
  moduleOp = mlir::parseSourceFile<mlir::ModuleOp>(sources, &context);
  if (!moduleOp)
    return stageFailed("parsing and verification");

  // Stage 1: the front end declares the parameters.
  mlir::PassManager frontend(&context);
  mlir::switchyard::FrontendPipelineOptions frontendOptions;
  frontendOptions.numLayers = options.numLayers;
  mlir::switchyard::buildFrontendPipeline(frontend, frontendOptions);
  if (llvm::Error error = run(frontend, "the front end"))
    return error;
  for (mlir::lm::ParamOp param : moduleOp->getOps<mlir::lm::ParamOp>()) {
    Expected<TensorSpec> spec =
        toTensorSpec(param.getType(), "parameter " + param.getSymName().str());
    if (!spec)
      return spec.takeError();
    std::optional<DType> dtype = toDType(spec->type);
    std::optional<InitKind> init = parseInitKind(
        mlir::lm::stringifyInitKind(param.getInit().getKind()));
    if (!dtype || !init)
      return failure(llvm::formatv("parameter {0}: element type {1} is not "
                                   "a parameter type (f32, f16, bf16)",
                                   param.getSymName(), toString(spec->type)));
    params.params.push_back({param.getSymName().str(), spec->shape, *dtype,
                             *init, param.getInit().getStd().convertToDouble(),
                             param.getAlias().value_or("").str()});
  }

  // Stage 2: lower to linalg; the functions' tensor signatures are final.
  mlir::PassManager lowering(&context);
  mlir::switchyard::LoweringOptions loweringOptions;
  loweringOptions.gradients = options.gradients;
  loweringOptions.trainStep = options.trainStep;
  loweringOptions.optimizerStep = options.optimizerStep;
  loweringOptions.outlineLayers = options.outlineLayers;
  loweringOptions.probes = options.probes;
  loweringOptions.decoder = options.decoder;
  assert(options.fusion && "options not resolved for a target");
  loweringOptions.fusion = *options.fusion;
  loweringOptions.groupedTileRows = options.groupedTileRows;
  loweringOptions.fusedForms = fusedForms;
  loweringOptions.flashAttentionKernel = flashAttentionKernel;
  loweringOptions.scatterEmbeddingGradient = scatterEmbeddingGradient;
  loweringOptions.flashAttentionRounding = options.roundAttentionFactors;
  mlir::switchyard::buildLowerToLinalgPipeline(lowering, loweringOptions);
  if (llvm::Error error = run(lowering, "lowering to linalg"))
    return error;
  for (mlir::func::FuncOp func : moduleOp->getOps<mlir::func::FuncOp>()) {
    if (func.isDeclaration() || func.isPrivate())
      continue;
    FunctionSpec spec;
    spec.name = func.getSymName().str();
    if (auto of = func->getAttrOfType<mlir::StringAttr>(mlir::lm::kDecoderAttr))
      spec.decoderOf = of.str();
    for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
      Expected<TensorSpec> arg = toTensorSpec(
          type, llvm::formatv("function @{0}: argument #{1}", spec.name, index)
                    .str());
      if (!arg)
        return arg.takeError();
      if (auto param =
              func.getArgAttrOfType<mlir::StringAttr>(index, "lm.param")) {
        arg->param = param.str();
        arg->role = ArgRole::param;
      }
      static constexpr std::pair<llvm::StringLiteral, ArgRole> kRoles[] = {
          {"lm.targets", ArgRole::targets}, {"lm.seed", ArgRole::seed},
          {"lm.adam_m", ArgRole::adamM},    {"lm.adam_v", ArgRole::adamV},
          {"lm.hyper", ArgRole::hyper},     {"lm.grad", ArgRole::gradient}};
      for (const auto &[attr, role] : kRoles)
        if (func.getArgAttr(index, attr))
          arg->role = role;
      if (auto vocab =
              func.getArgAttrOfType<mlir::IntegerAttr>(index, "lm.vocab"))
        arg->vocab = vocab.getInt();
      spec.arguments.push_back(std::move(*arg));
      // Callers' buffers are never written.
      func.setArgAttr(index, "bufferization.writable",
                      mlir::BoolAttr::get(&context, false));
    }
    for (auto [index, type] : llvm::enumerate(func.getResultTypes())) {
      Expected<TensorSpec> result = toTensorSpec(
          type,
          llvm::formatv("function @{0}: result #{1}", spec.name, index).str());
      if (!result)
        return result.takeError();
      if (auto probe = func.getResultAttrOfType<mlir::StringAttr>(
              index, mlir::switchyard::kProbeAttr))
        result->probe = probe.str();
      spec.results.push_back(std::move(*result));
    }
    func->setAttr(mlir::LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  mlir::UnitAttr::get(&context));
    functions.push_back(std::move(spec));
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

namespace {

/// Checks one argument: a host tensor (everything) or a handle's type and
/// shape (its contents stay where they are).
llvm::Error checkArgument(StringRef name, size_t index, const TensorSpec &spec,
                          const CallArgument &argument) {
  const HostTensor *host = argument.host;
  ElementType type = host ? host->type : argument.device->type();
  llvm::ArrayRef<int64_t> shape =
      host ? llvm::ArrayRef<int64_t>(host->shape) : argument.device->shape();
  const std::string &tensorName = host ? host->name : argument.device->name();
  std::string what =
      spec.param.empty()
          ? llvm::formatv("@{0} argument #{1}", name, index).str()
          : llvm::formatv("@{0} parameter '{1}'", name, spec.param).str();
  if (!tensorName.empty() && tensorName != spec.param)
    what = tensorName + " (" + what + ")";
  if (type != spec.type)
    return failure(llvm::formatv("{0}: expected element type {1}, found {2}",
                                 what, toString(spec.type), toString(type)));
  bool shapeOk = shape.size() == spec.shape.size();
  for (size_t d = 0; shapeOk && d < spec.shape.size(); ++d)
    shapeOk = spec.shape[d] < 0 ? shape[d] >= 0 : shape[d] == spec.shape[d];
  if (!shapeOk)
    return failure(llvm::formatv("{0}: expected shape {1}, found {2}", what,
                                 formatShape(spec.shape), formatShape(shape)));
  if (!host)
    return llvm::Error::success();
  const HostTensor &tensor = *host;
  int64_t count = tensor.numElements();
  if (count < 0 || tensor.bytes.size() != size_t(count) * sizeOf(tensor.type))
    return failure(llvm::formatv("{0}: holds {1} bytes, its shape needs {2}",
                                 what, tensor.bytes.size(),
                                 count * int64_t(sizeOf(tensor.type))));
  if (spec.vocab) {
    for (int64_t i = 0; i < count; ++i) {
      int64_t id = tensor.type == ElementType::i32
                       ? tensor.values<int32_t>()[i]
                       : tensor.values<int64_t>()[i];
      if (id < 0 || id >= *spec.vocab)
        return failure(llvm::formatv(
            "{0}: token id {1} at position {2} is outside the vocabulary "
            "[0, {3})",
            what, id, i, *spec.vocab));
    }
  }
  return llvm::Error::success();
}

} // namespace

Expected<const FunctionSpec *>
detail::checkCall(const std::vector<FunctionSpec> &functions, StringRef name,
                  llvm::ArrayRef<CallArgument> arguments) {
  const FunctionSpec *function = nullptr;
  for (const FunctionSpec &candidate : functions)
    if (candidate.name == name)
      function = &candidate;
  if (!function)
    return failure(llvm::formatv("no function @{0} in the program", name));
  if (arguments.size() != function->arguments.size())
    return failure(llvm::formatv("@{0} takes {1} arguments, {2} given", name,
                                 function->arguments.size(),
                                 arguments.size()));
  for (auto [index, spec] : llvm::enumerate(function->arguments))
    if (llvm::Error error = checkArgument(name, index, spec, arguments[index]))
      return std::move(error);
  return function;
}

Expected<const FunctionSpec *>
detail::checkCall(const std::vector<FunctionSpec> &functions, StringRef name,
                  llvm::ArrayRef<const HostTensor *> arguments) {
  std::vector<CallArgument> wrapped(arguments.begin(), arguments.end());
  return checkCall(functions, name, wrapped);
}

//===----------------------------------------------------------------------===//
// Resident tensors in host memory (the defaults of Program)
//===----------------------------------------------------------------------===//

DeviceTensor::~DeviceTensor() = default;

int64_t DeviceTensor::numElements() const {
  int64_t count = 1;
  for (int64_t size : sizes)
    count *= size;
  return count;
}

namespace {
/// A handle of a backend that computes in host memory: the tensor itself.
class HostResidentTensor final : public DeviceTensor {
public:
  HostResidentTensor(HostTensor tensor, StringRef backendName)
      : DeviceTensor(tensor.type, tensor.shape, tensor.name),
        tensor(std::move(tensor)), backendName(backendName.str()) {}
  StringRef backend() const override { return backendName; }

  HostTensor tensor;

private:
  std::string backendName;
};

/// `tensor` as a handle of `program`'s host-memory handles, or an error.
Expected<const HostResidentTensor *> ownHandle(const Program &program,
                                               const DeviceTensor &tensor) {
  if (tensor.backend() != program.backend())
    return failure(llvm::formatv("tensor '{0}' is held by the {1} backend, "
                                 "not by this {2} program",
                                 tensor.name(), tensor.backend(),
                                 program.backend()));
  return static_cast<const HostResidentTensor *>(&tensor);
}
} // namespace

Expected<std::unique_ptr<DeviceTensor>>
Program::upload(const HostTensor &tensor) {
  return std::make_unique<HostResidentTensor>(tensor, backend());
}

Expected<HostTensor> Program::download(const DeviceTensor &tensor) {
  Expected<const HostResidentTensor *> own = ownHandle(*this, tensor);
  if (!own)
    return own.takeError();
  return (*own)->tensor;
}

llvm::Error Program::allReduceMean(llvm::ArrayRef<DeviceTensor *> tensors,
                                   NcclGroup &group) {
  return failure(llvm::formatv(
      "the {0} backend keeps its tensors in host memory: its ranks average "
      "them through MPI, not NCCL",
      backend()));
}

Expected<std::vector<CallResult>>
Program::callResident(StringRef name, llvm::ArrayRef<CallArgument> arguments,
                      llvm::ArrayRef<bool> keep) {
  std::vector<const HostTensor *> hosts;
  for (const CallArgument &argument : arguments) {
    if (argument.host) {
      hosts.push_back(argument.host);
      continue;
    }
    Expected<const HostResidentTensor *> own =
        ownHandle(*this, *argument.device);
    if (!own)
      return failure(llvm::formatv("calling @{0}: {1}", name,
                                   llvm::toString(own.takeError())));
    hosts.push_back(&(*own)->tensor);
  }
  Expected<std::vector<HostTensor>> results = call(name, hosts);
  if (!results)
    return results.takeError();
  std::vector<CallResult> out(results->size());
  for (auto [index, result] : llvm::enumerate(*results)) {
    if (index < keep.size() && keep[index])
      out[index].device =
          std::make_unique<HostResidentTensor>(std::move(result), backend());
    else
      out[index].host = std::move(result);
  }
  return out;
}

std::vector<int64_t> detail::denseDescriptor(const void *data,
                                             llvm::ArrayRef<int64_t> shape) {
  auto address = reinterpret_cast<int64_t>(data);
  std::vector<int64_t> descriptor = {address, address, 0};
  descriptor.insert(descriptor.end(), shape.begin(), shape.end());
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(strides.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  descriptor.insert(descriptor.end(), strides.begin(), strides.end());
  return descriptor;
}

int64_t ResultDescriptor::numElements() const {
  int64_t count = 1;
  for (int64_t size : sizes)
    count *= size;
  return count;
}

int64_t ResultDescriptor::spanElements() const {
  if (numElements() <= 0)
    return 0;
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d)
    last += (sizes[d] - 1) * strides[d];
  return last + 1;
}

bool ResultDescriptor::isDense() const {
  int64_t stride = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != stride)
      return false;
    stride *= sizes[d];
  }
  return true;
}

std::string detail::describeHostCpu() {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "host " << llvm::sys::getHostCPUName();
  std::vector<std::string> names;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    names.push_back((feature.second ? "+" : "-") + feature.first().str());
  llvm::sort(names);
  for (const std::string &name : names)
    os << " " << name;
  return text;
}

std::optional<std::string>
detail::describeCompilation(StringRef source, StringRef bufferName,
                            const CompileOptions &options, StringRef backend) {
  llvm::sys::fs::file_status executable;
  if (llvm::sys::fs::status("/proc/self/exe", executable))
    return std::nullopt;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "switchyard compilation 1\ncompiler: LLVM " << LLVM_VERSION_STRING
     << ", executable of " << executable.getSize() << " bytes modified "
     << executable.getLastModificationTime().time_since_epoch().count()
     << "\nbackend: " << backend;
  assert(options.fusion && "describing options that are not resolved");
  const mlir::switchyard::FusionOptions &fusion = *options.fusion;
  os << "\noptions: layers " << options.numLayers << ", gradients "
     << options.gradients << ", train step " << options.trainStep
     << ", optimizer step " << options.optimizerStep << ", outlined layers "
     << options.outlineLayers << ", probes " << options.probes << ", decoder "
     << options.decoder << ", fuse "
     << mlir::switchyard::describeFusions(fusion) << ", grouped experts "
     << fusion.groupedExperts << ", grouped tile rows "
     << options.groupedTileRows << ", JIT level " << options.optLevel
     << ", contraction operands " << options.roundContractionOperands
     << ", attention factors " << options.roundAttentionFactors;
  if (options.emulateGpu) {
    // Every option of the emulation, as it declares them.
    OptionPrinter printer{os, ", emulation "};
    mlir::switchyard::GpuEmulationOptions emulation = *options.emulateGpu;
    emulation.bindOptions(printer);
  }
  os << "\nbuffer: " << bufferName << "\n" << source;
  return text;
}

Expected<std::vector<ResultDescriptor>>
detail::invoke(void (*entry)(void **), const FunctionSpec &function,
               std::vector<std::vector<int64_t>> &arguments) {
  // The C interface takes a pointer to the result descriptor(s) first, then
  // a pointer to each argument descriptor.
  size_t resultWords = 0;
  for (const TensorSpec &result : function.results)
    resultWords += 3 + 2 * result.shape.size();
  std::vector<int64_t> words(resultWords, 0);
  void *resultPointer = words.data();
  std::vector<void *> descriptorPointers;
  for (std::vector<int64_t> &descriptor : arguments)
    descriptorPointers.push_back(descriptor.data());
  llvm::SmallVector<void *> packed;
  if (!function.results.empty())
    packed.push_back(&resultPointer);
  for (void *&pointer : descriptorPointers)
    packed.push_back(&pointer);
  // Guarded: running out of memory ends the call with an error.
  std::string error = callGuarded(entry, packed.data());
  if (!error.empty())
    return failure(
        llvm::formatv("calling @{0}: {1}", function.name, error));

  std::vector<ResultDescriptor> results;
  size_t offset = 0;
  for (const TensorSpec &spec : function.results) {
    size_t rank = spec.shape.size();
    ResultDescriptor result;
    result.allocated = reinterpret_cast<void *>(words[offset]);
    result.aligned = reinterpret_cast<uint8_t *>(words[offset + 1]);
    result.offset = words[offset + 2];
    result.sizes.assign(words.begin() + offset + 3,
                        words.begin() + offset + 3 + rank);
    result.strides.assign(words.begin() + offset + 3 + rank,
                          words.begin() + offset + 3 + 2 * rank);
    offset += 3 + 2 * rank;
    results.push_back(std::move(result));
  }
  return results;
}

HostTensor detail::gather(const ResultDescriptor &result, ElementType type,
                          const uint8_t *first) {
  HostTensor output;
  output.type = type;
  output.shape = result.sizes;
  size_t rank = result.sizes.size();
  size_t elementSize = sizeOf(type);
  int64_t count = output.numElements();
  output.bytes.resize(size_t(std::max<int64_t>(count, 0)) * elementSize);
  if (count <= 0)
    return output;
  // Row-major results (all but views) are one copy; otherwise one copy per
  // unit-stride row, or element by element.
  if (result.isDense()) {
    std::memcpy(output.bytes.data(), first, size_t(count) * elementSize);
    return output;
  }
  int64_t rowLength = rank ? result.sizes[rank - 1] : 1;
  bool unitRows = rank && result.strides[rank - 1] == 1;
  std::vector<int64_t> index(rank, 0);
  for (int64_t linear = 0; linear < count;) {
    int64_t source = 0;
    for (size_t d = 0; d < rank; ++d)
      source += index[d] * result.strides[d];
    if (unitRows) {
      std::memcpy(output.bytes.data() + linear * elementSize,
                  first + source * elementSize, rowLength * elementSize);
      linear += rowLength;
      index[rank - 1] = rowLength - 1;
    } else {
      std::memcpy(output.bytes.data() + linear * elementSize,
                  first + source * elementSize, elementSize);
      ++linear;
    }
    for (int64_t d = int64_t(rank) - 1; d >= 0; --d) {
      if (++index[d] < result.sizes[d])
        break;
      index[d] = 0;
    }
  }
  return output;
}

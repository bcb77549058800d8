//===- CpuProgram.cpp - compiled programs on the CPU ----------------------===//
//
// Compiles a module with the Switchyard pipeline builders, records the
// signatures of its functions, and runs them with MLIR's ExecutionEngine
// through their C interfaces (memref descriptors built from HostTensors).
//
//===----------------------------------------------------------------------===//

#include "runtime/CpuProgram.h"

#include "dialect/InitSwitchyard.h"
#include "dialect/Lm/IR/LmOps.h"
#include "dialect/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"

#include <cstdlib>
#include <cstring>
#include <set>

using namespace switchyard::runtime;
using llvm::Expected;
using llvm::StringRef;

#ifndef SWITCHYARD_C_RUNNER_UTILS
#define SWITCHYARD_C_RUNNER_UTILS ""
#endif

namespace {

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

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
    return failure(llvm::formatv("{0} has type {1}; the CPU runtime passes "
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

struct CpuProgram::Impl {
  mlir::MLIRContext context;
  std::vector<FunctionSpec> functions;
  ParamTable params;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

CpuProgram::CpuProgram() : impl(std::make_unique<Impl>()) {}
CpuProgram::~CpuProgram() = default;

const std::vector<FunctionSpec> &CpuProgram::functions() const {
  return impl->functions;
}

const FunctionSpec *CpuProgram::lookup(StringRef name) const {
  for (const FunctionSpec &function : impl->functions)
    if (function.name == name)
      return &function;
  return nullptr;
}

const ParamTable &CpuProgram::params() const { return impl->params; }

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
  mlir::MLIRContext &context = program->impl->context;
  mlir::DialectRegistry registry;
  mlir::switchyard::registerDialects(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();

  // Compiler diagnostics, with locations, go into the returned error.
  std::string diagnostics;
  llvm::raw_string_ostream diagnosticStream(diagnostics);
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, bufferName), llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler handler(sources, &context,
                                           diagnosticStream);
  auto compileError = [&](StringRef stage) {
    return failure(llvm::formatv("{0}: {1} failed\n{2}", bufferName, stage,
                                 diagnostics));
  };

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sources, &context);
  if (!module)
    return compileError("parsing and verification");

  // Stage 1: the front end declares the parameters.
  mlir::PassManager frontend(&context);
  mlir::switchyard::FrontendPipelineOptions frontendOptions;
  frontendOptions.numLayers = options.numLayers;
  mlir::switchyard::buildFrontendPipeline(frontend, frontendOptions);
  if (failed(frontend.run(*module)))
    return compileError("the front end");
  for (mlir::lm::ParamOp param : module->getOps<mlir::lm::ParamOp>()) {
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
    program->impl->params.params.push_back(
        {param.getSymName().str(), spec->shape, *dtype, *init,
         param.getInit().getStd().convertToDouble()});
  }
  // Stage 2: lower to linalg; the functions' tensor signatures are final.
  mlir::PassManager lowering(&context);
  mlir::switchyard::LoweringOptions loweringOptions;
  loweringOptions.gradients = options.gradients;
  loweringOptions.trainStep = options.trainStep;
  loweringOptions.fusion = options.fusion;
  mlir::switchyard::buildLowerToLinalgPipeline(lowering, loweringOptions);
  if (failed(lowering.run(*module)))
    return compileError("lowering to linalg");
  for (mlir::func::FuncOp func : module->getOps<mlir::func::FuncOp>()) {
    if (func.isDeclaration() || func.isPrivate())
      continue;
    FunctionSpec spec;
    spec.name = func.getSymName().str();
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
          {"lm.hyper", ArgRole::hyper}};
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
      spec.results.push_back(std::move(*result));
    }
    func->setAttr(mlir::LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                  mlir::UnitAttr::get(&context));
    program->impl->functions.push_back(std::move(spec));
  }

  // Stages 5-6: native code.
  mlir::PassManager codegen(&context);
  mlir::switchyard::buildCpuCodegenPipeline(codegen);
  if (failed(codegen.run(*module)))
    return compileError("CPU code generation");

  auto transformer = mlir::makeOptimizingTransformer(options.optLevel,
                                                     /*sizeLevel=*/0, nullptr);
  mlir::ExecutionEngineOptions engineOptions;
  engineOptions.transformer = transformer;
  llvm::SmallVector<StringRef> libraries;
  if (StringRef(SWITCHYARD_C_RUNNER_UTILS) != "")
    libraries.push_back(SWITCHYARD_C_RUNNER_UTILS);
  engineOptions.sharedLibPaths = libraries;
  Expected<std::unique_ptr<mlir::ExecutionEngine>> engine =
      mlir::ExecutionEngine::create(*module, engineOptions);
  if (!engine)
    return failure(llvm::formatv("{0}: JIT compilation failed: {1}\n{2}",
                                 bufferName,
                                 llvm::toString(engine.takeError()),
                                 diagnostics));
  program->impl->engine = std::move(*engine);
  return program;
}

Expected<std::vector<HostTensor>>
CpuProgram::call(StringRef name, llvm::ArrayRef<const HostTensor *> arguments) {
  const FunctionSpec *function = lookup(name);
  if (!function)
    return failure(llvm::formatv("no function @{0} in the program", name));
  if (arguments.size() != function->arguments.size())
    return failure(llvm::formatv("@{0} takes {1} arguments, {2} given", name,
                                 function->arguments.size(),
                                 arguments.size()));

  // One memref descriptor per argument: {allocated, aligned, offset,
  // sizes[rank], strides[rank]}, all 8-byte words.
  std::vector<std::vector<int64_t>> descriptors;
  std::set<const void *> argumentBuffers;
  for (auto [index, spec] : llvm::enumerate(function->arguments)) {
    const HostTensor &tensor = *arguments[index];
    std::string what =
        spec.param.empty()
            ? llvm::formatv("@{0} argument #{1}", name, index).str()
            : llvm::formatv("@{0} parameter '{1}'", name, spec.param).str();
    if (!tensor.name.empty() && tensor.name != spec.param)
      what = tensor.name + " (" + what + ")";
    if (tensor.type != spec.type)
      return failure(llvm::formatv("{0}: expected element type {1}, found {2}",
                                   what, toString(spec.type),
                                   toString(tensor.type)));
    bool shapeOk = tensor.shape.size() == spec.shape.size();
    for (size_t d = 0; shapeOk && d < spec.shape.size(); ++d)
      shapeOk = spec.shape[d] < 0 ? tensor.shape[d] >= 0
                                  : tensor.shape[d] == spec.shape[d];
    if (!shapeOk)
      return failure(llvm::formatv("{0}: expected shape {1}, found {2}", what,
                                   formatShape(spec.shape),
                                   formatShape(tensor.shape)));
    int64_t count = tensor.numElements();
    if (count < 0 ||
        tensor.bytes.size() != size_t(count) * sizeOf(tensor.type))
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
    auto *data = const_cast<uint8_t *>(tensor.bytes.data());
    argumentBuffers.insert(data);
    std::vector<int64_t> descriptor = {reinterpret_cast<int64_t>(data),
                                       reinterpret_cast<int64_t>(data), 0};
    descriptor.insert(descriptor.end(), tensor.shape.begin(),
                      tensor.shape.end());
    std::vector<int64_t> strides(tensor.shape.size(), 1);
    for (int64_t d = int64_t(strides.size()) - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * tensor.shape[d + 1];
    descriptor.insert(descriptor.end(), strides.begin(), strides.end());
    descriptors.push_back(std::move(descriptor));
  }

  // The C interface takes a pointer to the result descriptor(s) first, then
  // a pointer to each argument descriptor.
  size_t resultWords = 0;
  for (const TensorSpec &result : function->results)
    resultWords += 3 + 2 * result.shape.size();
  std::vector<int64_t> results(resultWords, 0);
  void *resultPointer = results.data();
  std::vector<void *> descriptorPointers;
  for (std::vector<int64_t> &descriptor : descriptors)
    descriptorPointers.push_back(descriptor.data());
  llvm::SmallVector<void *> packed;
  if (!function->results.empty())
    packed.push_back(&resultPointer);
  for (void *&pointer : descriptorPointers)
    packed.push_back(&pointer);
  if (llvm::Error error =
          impl->engine->invokePacked("_mlir_ciface_" + name.str(), packed))
    return failure(llvm::formatv("calling @{0}: {1}", name,
                                 llvm::toString(std::move(error))));

  // Copy each result out (following its strides) and free its buffer.
  std::vector<HostTensor> outputs;
  std::set<void *> freed;
  size_t offset = 0;
  for (const TensorSpec &spec : function->results) {
    size_t rank = spec.shape.size();
    auto *allocated = reinterpret_cast<void *>(results[offset]);
    auto *aligned = reinterpret_cast<uint8_t *>(results[offset + 1]);
    int64_t elementOffset = results[offset + 2];
    std::vector<int64_t> sizes(results.begin() + offset + 3,
                               results.begin() + offset + 3 + rank);
    std::vector<int64_t> strides(results.begin() + offset + 3 + rank,
                                 results.begin() + offset + 3 + 2 * rank);
    offset += 3 + 2 * rank;

    HostTensor output;
    output.type = spec.type;
    output.shape = sizes;
    size_t elementSize = sizeOf(spec.type);
    int64_t count = output.numElements();
    output.bytes.resize(size_t(std::max<int64_t>(count, 0)) * elementSize);
    std::vector<int64_t> index(rank, 0);
    for (int64_t linear = 0; linear < count; ++linear) {
      int64_t source = elementOffset;
      for (size_t d = 0; d < rank; ++d)
        source += index[d] * strides[d];
      std::memcpy(output.bytes.data() + linear * elementSize,
                  aligned + source * elementSize, elementSize);
      for (int64_t d = int64_t(rank) - 1; d >= 0; --d) {
        if (++index[d] < sizes[d])
          break;
        index[d] = 0;
      }
    }
    if (allocated && !argumentBuffers.count(allocated) &&
        freed.insert(allocated).second)
      std::free(allocated);
    outputs.push_back(std::move(output));
  }
  return outputs;
}

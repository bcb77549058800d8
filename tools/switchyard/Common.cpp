//===- Common.cpp - what the switchyard commands share --------------------===//
//
// The option groups and helpers of Common.h: the model, device,
// parameter-file and corpus options with their checks, the MLIR options
// every command shows, loading a model and running the front end, error
// messages, and the compilation of a model for the CPU, the GPU or the
// GPU emulation.
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/Common.h"

#include "lib/InitSwitchyard.h"
#include "lib/Pipelines/Pipelines.h"
#include "runtime/CompileCache.h"
#include "runtime/ComputeThreads.h"
#include "runtime/Engine/CpuProgram.h"
#ifdef SWITCHYARD_HAVE_GPU_RUNTIME
#include "runtime/CudaDriver.h"
#endif
#include "runtime/TensorFile.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;
namespace sy = mlir::switchyard;

namespace switchyard::driver {

OwningOpRef<ModuleOp> loadModel(MLIRContext &context, llvm::SourceMgr &sources,
                                StringRef path) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(path, &error);
  if (!file) {
    llvm::errs() << "switchyard: cannot read model '" << path
                 << "': " << error << "\n";
    return nullptr;
  }
  sources.AddNewSourceBuffer(std::move(file), SMLoc());
  return parseSourceFile<ModuleOp>(sources, &context);
}

LogicalResult runFrontend(ModuleOp module, int64_t numLayers) {
  PassManager pm(module.getContext());
  if (failed(applyPassManagerCLOptions(pm))) {
    llvm::errs() << "switchyard: invalid pass manager options\n";
    return failure();
  }
  applyDefaultTimingPassManagerCLOptions(pm);
  mlir::switchyard::FrontendPipelineOptions options;
  options.numLayers = numLayers;
  mlir::switchyard::buildFrontendPipeline(pm, options);
  return pm.run(module);
}

int fail(llvm::Error error) {
  llvm::errs() << "switchyard: " << llvm::toString(std::move(error)) << "\n";
  return 1;
}

int fail(const llvm::Twine &message) {
  llvm::errs() << "switchyard: " << message << "\n";
  return 1;
}

//===----------------------------------------------------------------------===//
// Model options
//===----------------------------------------------------------------------===//

ModelOptions::ModelOptions()
    : category("Model options"), input(cl::Positional, cl::desc("<model.mlir>"),
                                       cl::Required, cl::cat(category)),
      numLayers("num-layers",
                cl::desc("Model depth L for the scaled initialisers (default: "
                         "the number of attention blocks)"),
                cl::init(0), cl::cat(category)),
      fuse("fuse",
           cl::desc("Fusions to apply: default (the fastest set measured for "
                    "the device: router,attention,elementwise,rows on the GPU "
                    "and in its emulation, with the expert projections "
                    "grouped; router,expert-projection,elementwise on the "
                    "CPU), all, none, or "
                    "a comma-separated list of router, expert-projection, "
                    "attention, elementwise, rows (the unfused route computes "
                    "the same results; see docs/Fusions.md)"),
           cl::init("default"), cl::cat(category)),
      experts("experts",
              cl::desc("How the unfused expert projections (V and O, and "
                       "their gradients) compute: grouped (routes sorted by "
                       "expert, one matmul per expert: the routes' MACs; on "
                       "the GPU and in its emulation without host reads: a "
                       "parallel sort, each expert's rows padded to 64-row "
                       "tiles, one grouped kernel for all experts), dense "
                       "(every token through every expert, E/k times the "
                       "MACs, as plain matmuls), or default (grouped, on "
                       "every device). The fused projections gather per "
                       "route either way"),
              cl::init("default"), cl::cat(category)) {}

llvm::Error ModelOptions::check() const {
  if (numLayers < 0 || numLayers > kMaxLayers)
    return llvm::createStringError(
        llvm::formatv("--num-layers: expected 0 (count the attention "
                      "blocks) to {0}, found {1}",
                      kMaxLayers, int64_t(numLayers))
            .str());
  return llvm::Error::success();
}

llvm::Expected<rt::CompileOptions>
ModelOptions::compileOptions(bool gpu) const {
  if (llvm::Error error = check())
    return std::move(error);
  rt::CompileOptions options;
  options.numLayers = numLayers;
  if (llvm::Error error = sy::checkExpertsSetting(experts))
    return llvm::createStringError("--experts: " +
                                   llvm::toString(std::move(error)));
  if (llvm::Error error = sy::checkFusionSetting(fuse))
    return llvm::createStringError("--fuse: " +
                                   llvm::toString(std::move(error)));
  options.fusion = llvm::cantFail(sy::resolveFusions(
      fuse, experts, gpu ? sy::Target::Gpu : sy::Target::Cpu));
  return options;
}

//===----------------------------------------------------------------------===//
// MLIR options and context
//===----------------------------------------------------------------------===//

/// The MLIR options the commands show (registerCommandOptions).
static cl::OptionCategory &mlirCategory() {
  static cl::OptionCategory category("MLIR options");
  return category;
}

/// Whether an MLIR option (IR printing, timing, statistics) is on the
/// command line: they report on the compile, which the cache would skip.
static bool mlirOptionGiven() {
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (option->getNumOccurrences() &&
        llvm::is_contained(option->Categories, &mlirCategory()))
      return true;
  return false;
}

void registerCommandOptions(
    cl::OptionCategory &category,
    llvm::ArrayRef<const cl::OptionCategory *> moreCategories) {
  cl::OptionCategory &mlirCategory = ::switchyard::driver::mlirCategory();
  mlir::switchyard::registerPassesAndPipelines();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (name.starts_with("mlir-print-ir") || name == "mlir-timing" ||
        name == "mlir-print-debuginfo" || name == "mlir-pass-statistics" ||
        name == "verify-each")
      option->addCategory(mlirCategory);
  llvm::SmallVector<const cl::OptionCategory *> shown = {&category,
                                                        &mlirCategory};
  llvm::append_range(shown, moreCategories);
  cl::HideUnrelatedOptions(shown);
}

void setUpContext(MLIRContext &context) {
  DialectRegistry registry;
  mlir::switchyard::registerDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
}

//===----------------------------------------------------------------------===//
// Parameter files and devices
//===----------------------------------------------------------------------===//

ParamFileFlags::ParamFileFlags(cl::OptionCategory &category)
    : renames("rename",
              cl::desc("Read parameter-file tensors whose names start with "
                       "FROM as starting with TO (repeatable; the first "
                       "matching rule applies; an empty FROM prefixes "
                       "every name, e.g. --rename =layers.0.att. for a "
                       "file of one official module)"),
              cl::value_desc("FROM=TO"), cl::cat(category)),
      initMissing("init-missing",
                  cl::desc("Initialise the parameters that no parameter "
                           "file holds from their declared initialisers "
                           "(--seed), each named on stderr, instead of "
                           "failing"),
                  cl::init(false), cl::cat(category)) {}

TrainedParams::TrainedParams(cl::OptionCategory &category)
    : files("params",
            cl::desc("The trained parameters: a checkpoint of switchyard "
                     "train, or safetensors files by Switchyard's or the "
                     "official names (repeatable)"),
            cl::value_desc("file.safetensors"), cl::OneOrMore,
            cl::cat(category)),
      flags(category),
      tokenizerModel(
          "tokenizer-model",
          cl::desc("The SentencePiece model the checkpoint was trained with "
                   "(train's --tokenizer-model): text is encoded and decoded "
                   "with it; default: bytes"),
          cl::value_desc("file"), cl::cat(category)) {}

llvm::Expected<std::unique_ptr<rt::SentencePieceTokenizer>>
TrainedParams::loadTokenizer() const {
  if (tokenizerModel.empty())
    return nullptr;
  return rt::SentencePieceTokenizer::load(tokenizerModel);
}

llvm::Expected<rt::LanguageModel>
bindLanguageModel(rt::Program &program, llvm::StringRef input,
                  llvm::ArrayRef<std::string> files,
                  const rt::ParamFileOptions &options,
                  std::vector<rt::HostTensor> &storage, llvm::StringRef command,
                  const rt::SentencePieceTokenizer *tokenizer) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  // The models' own functions; a decoding step belongs to its model's.
  std::vector<const rt::FunctionSpec *> models;
  for (const rt::FunctionSpec &function : program.functions())
    if (function.decoderOf.empty())
      models.push_back(&function);
  if (models.size() != 1)
    return error(input + " defines " + llvm::Twine(models.size()) +
                 " models; " + command + " takes a file with one");
  // A checkpoint trained on other tokens is refused by name.
  llvm::Expected<std::vector<rt::HostTensor>> loaded = rt::loadParams(
      program, files, tokenizer ? tokenizer->identity() : "bytes", options);
  if (!loaded)
    return loaded.takeError();
  storage = std::move(*loaded);
  llvm::Expected<rt::LanguageModel> language =
      rt::LanguageModel::bind(program, *models.front(), storage);
  if (!language)
    return language.takeError();
  if (tokenizer) {
    int64_t pieces = tokenizer->vocabSize();
    if (language->vocab < pieces)
      return error(llvm::formatv("@{0} has a vocabulary of {1}; the "
                                 "tokenizer has {2} pieces",
                                 models.front()->name, language->vocab,
                                 pieces));
    language->pieces = pieces;
  } else if (language->vocab != 256) {
    return error(llvm::formatv("@{0} has a vocabulary of {1}; {2} reads "
                               "and writes bytes (a vocabulary of 256; "
                               "--tokenizer-model for subwords)",
                               models.front()->name, language->vocab, command));
  }
  return language;
}

llvm::Expected<rt::ParamFileOptions>
ParamFileFlags::options(uint64_t seed) const {
  rt::ParamFileOptions result;
  for (const std::string &text : renames) {
    llvm::Expected<rt::Rename> rule = rt::parseRename(text);
    if (!rule)
      return rule.takeError();
    result.renames.push_back(std::move(*rule));
  }
  result.initMissing = initMissing;
  result.seed = seed;
  result.note = [](const std::string &line) {
    llvm::errs() << "switchyard: note: " << line << "\n";
  };
  return result;
}

DeviceOption::DeviceOption(cl::OptionCategory &category)
    : device("device",
             cl::desc("Where to run the compiled model (default: cpu)"),
             cl::values(clEnumValN(Device::cpu, "cpu",
                                   "the CPU target, JIT-compiled here"),
                        clEnumValN(Device::gpu, "gpu",
                                   "the GPU target (NVIDIA, through the "
                                   "CUDA driver) on device 0"),
                        clEnumValN(Device::gpuEmulation, "gpu-emulation",
                                   "the GPU target's kernels run on this "
                                   "CPU, one thread after another (slow; "
                                   "checks the GPU route without a GPU)")),
             cl::init(Device::cpu), cl::cat(category)),
      noCache("no-cache",
              cl::desc("Compile even where the compile cache holds the "
                       "program, and store nothing (the cache: "
                       "$SWITCHYARD_CACHE_DIR, else "
                       "$XDG_CACHE_HOME/switchyard or "
                       "~/.cache/switchyard; on the GPU a hit skips the "
                       "compiler and ptxas, and the host code is still "
                       "JIT-compiled; the MLIR options, which report on a "
                       "compile, imply it)"),
              cl::init(false), cl::cat(category)),
      threads("cpu-threads",
              cl::desc("Threads the CPU code runs its parallel loops on "
                       "(--device cpu): 0, the default, for one per core; "
                       "results do not depend on it"),
              cl::init(0), cl::cat(category)),
      cpu("cpu",
          cl::desc("Generate the CPU code for this CPU instead of this "
                   "machine's (--device cpu or gpu-emulation): an LLVM CPU "
                   "name, as clang's -mcpu takes (x86-64-v3, haswell, "
                   "znver1, skylake-avx512, neoverse-v1, ...); the matmul "
                   "kernels' register tile follows its vector registers. "
                   "This machine must be able to run it"),
          cl::value_desc("name"), cl::cat(category)),
      cpuFeatures("cpu-features",
                  cl::desc("Features added to or taken from the CPU's (this "
                           "machine's, or --cpu's), as clang's -mattr "
                           "takes them: +avx512f,-avx512vl"),
                  cl::value_desc("list"), cl::cat(category)),
      gpuCategory("GPU code generation (--device gpu; --gpu-chip, "
                  "--gpu-block-size and --gpu-element-type also "
                  "gpu-emulation)"),
      gpu("gpu-", gpuCategory) {}

llvm::Expected<sy::GpuTargetOptions> DeviceOption::gpuOptions() const {
  // The flags the emulation reads (GpuTargetOptions::emulation).
  const llvm::StringRef emulated[] = {"--gpu-chip", "--gpu-block-size",
                                      "--gpu-element-type"};
  for (const std::string &flag : gpu.given()) {
    bool emulatedFlag = llvm::is_contained(emulated, flag);
    if (device == Device::gpu ||
        (device == Device::gpuEmulation && emulatedFlag))
      continue;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        flag + (emulatedFlag ? " needs --device gpu or gpu-emulation"
                             : " needs --device gpu"));
  }
  // Checked here too (the GPU pipeline checks every option), so that a
  // typo fails before the driver is looked for.
  const sy::GpuTargetOptions &options = gpu.value();
  if (device == Device::gpu) {
    if (llvm::Error error = options.verify("--gpu-"))
      return std::move(error);
  } else if (llvm::Error error = options.emulation().verify("--gpu-")) {
    return std::move(error);
  }
  return options;
}

llvm::Expected<std::unique_ptr<rt::Program>>
compileFor(const DeviceOption &device, const ModelOptions &model,
           const CompileRequest &request) {
  bool trainStep = request.trainStep;
  llvm::Expected<rt::CompileOptions> selected =
      model.compileOptions(device.device != Device::cpu);
  if (!selected)
    return selected.takeError();
  rt::CompileOptions options = *selected;
  options.trainStep = trainStep;
  options.optimizerStep = request.optimizerStep;
  options.probes = request.probes;
  options.decoder = request.decoder;
  if (device.threads.getNumOccurrences() && device.device != Device::cpu)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--cpu-threads needs --device cpu");
  for (const cl::opt<std::string> *flag : {&device.cpu, &device.cpuFeatures})
    if (flag->getNumOccurrences() && device.device == Device::gpu)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--" + flag->ArgStr +
                                         " needs --device cpu or "
                                         "gpu-emulation");
  options.cpu = device.cpu;
  options.cpuFeatures = device.cpuFeatures;
  rt::setComputeThreads(device.threads);
  StringRef path =
      request.input.empty() ? StringRef(model.input) : StringRef(request.input);
  llvm::Expected<sy::GpuTargetOptions> gpuOptions = device.gpuOptions();
  if (!gpuOptions)
    return gpuOptions.takeError();
  // Progress on stderr (compiling a large model takes a while, longer for
  // a GPU than for the CPU), once the device is known to be there.
  std::chrono::steady_clock::time_point start;
  auto announce = [&] {
    llvm::errs() << "compiling " << path
                 << (trainStep ? " with its train step\n" : "\n");
    start = std::chrono::steady_clock::now();
  };
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  if (device.device == Device::gpuEmulation) {
    options.emulateGpu = gpuOptions->emulation();
    llvm::errs() << "device: GPU emulation on this CPU (the GPU route's "
                    "kernels, one thread after another), "
                 << gpuOptions->elementType << " multiplicands"
                 << (options.emulateGpu->usesTensorCores()
                         ? " on emulated tensor cores (mma.sync)"
                         : "")
                 << "\n";
  }
  // The MLIR options report on a compile: with them, there is one.
  if (!device.noCache && !mlirOptionGiven())
    options.cacheDirectory = rt::defaultCacheDirectory();
  // "compiled in ..." or "loaded from the compile cache in ...".
  auto report = [&](StringRef cache, StringRef details) {
    if (cache.consume_front("hit "))
      llvm::errs() << llvm::formatv(
          "loaded from the compile cache in {0:f1} s{1} ({2})\n", seconds(),
          details, cache);
    else
      llvm::errs() << llvm::formatv(
          "compiled in {0:f1} s{1}{2}\n", seconds(), details,
          cache.empty() ? "" : "; compile cache: " + cache);
  };
  if (device.device != Device::gpu) {
    announce();
    llvm::Expected<std::unique_ptr<rt::CpuProgram>> program =
        rt::CpuProgram::compileFile(path, options);
    if (!program)
      return program.takeError();
    std::string cpu = options.describeCpu();
    report((*program)->cacheReport(), cpu.empty() ? "" : " for CPU " + cpu);
    return std::unique_ptr<rt::Program>(std::move(*program));
  }
#ifdef SWITCHYARD_HAVE_GPU_RUNTIME
  llvm::Expected<rt::cuda::Driver &> driver = rt::cuda::Driver::get();
  if (!driver)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--device gpu: " + llvm::toString(driver.takeError()));
  llvm::errs() << llvm::formatv(
      "device: {0} (sm_{1}, {2} multiprocessors, {3:f1} GiB, driver {4})\n",
      driver->device().name, driver->device().computeCapability,
      driver->device().multiprocessors,
      double(driver->device().totalMemory) / double(1ull << 30),
      driver->device().driverVersion);
  announce();
  llvm::Expected<std::unique_ptr<rt::GpuProgram>> program =
      rt::GpuProgram::compileFile(path, options, *gpuOptions);
  if (!program)
    return program.takeError();
  report((*program)->cacheReport(),
         llvm::formatv(" for {0}, {1} multiplicands, {2}", (*program)->chip(),
                       gpuOptions->elementType, gpuOptions->format)
             .str());
  return std::unique_ptr<rt::Program>(std::move(*program));
#else
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "--device gpu: this switchyard was built without the CUDA toolkit, so "
      "it has no GPU backend; rebuild where CMake finds the toolkit");
#endif
}

//===----------------------------------------------------------------------===//
// Corpus options
//===----------------------------------------------------------------------===//

CorpusOptions::CorpusOptions(cl::OptionCategory &category)
    : data("data",
           cl::desc("Text files or directories to train on (default: "
                    "Debian's fortunes)"),
           cl::value_desc("path"), cl::cat(category)),
      validFraction("valid-fraction",
                    cl::desc("Share of the text held out for validation, in "
                             "interleaved 4 KiB blocks (default 0.05)"),
                    cl::init(0.05), cl::cat(category)),
      tokenizer("tokenizer",
                cl::desc("Tokens: 'bytes' (the Enwik8 setting, default) or "
                         "'sentencepiece' subwords (the Wikitext/C4 "
                         "setting)"),
                cl::init("bytes"), cl::cat(category)),
      vocabSize("vocab-size",
                cl::desc("SentencePiece vocabulary to train (8000)"),
                cl::init(8000), cl::cat(category)),
      tokenizerModel(
          "tokenizer-model",
          cl::desc("SentencePiece model file: loaded when it exists, else "
                   "trained on the training text and written there"),
          cl::value_desc("file.model"), cl::cat(category)) {}

llvm::Error CorpusOptions::check() const {
  if (!(validFraction > 0 && validFraction < 1))
    return llvm::createStringError(
        llvm::formatv("--valid-fraction: expected a number in (0, 1), "
                      "found {0}",
                      llvm::format("%g", double(validFraction)))
            .str());
  if (tokenizer != "bytes" && tokenizer != "sentencepiece")
    return llvm::createStringError("--tokenizer: expected bytes or "
                                   "sentencepiece, found '" +
                                   tokenizer + "'");
  if (tokenizer == "sentencepiece") {
    // SentencePiece needs room for its special pieces; beyond 2^20 the
    // model's embedding and output alone would not fit a machine.
    if (vocabSize < 16 || vocabSize > (int64_t(1) << 20))
      return llvm::createStringError(
          llvm::formatv("--vocab-size: expected 16 to {0}, found {1}",
                        int64_t(1) << 20, int64_t(vocabSize))
              .str());
    if (!tokenizerModel.empty() && !llvm::sys::fs::exists(tokenizerModel))
      return rt::checkWritable(tokenizerModel);
  }
  return llvm::Error::success();
}

llvm::Expected<rt::TokenCorpus> CorpusOptions::load() const {
  if (llvm::Error error = check())
    return std::move(error);
  llvm::Expected<rt::ByteCorpus> bytes =
      data.empty()
          ? rt::ByteCorpus::loadFortunes(validFraction)
          : rt::ByteCorpus::load(
                std::vector<std::string>(data.begin(), data.end()),
                validFraction);
  if (!bytes)
    return bytes.takeError();
  if (tokenizer == "bytes")
    return rt::TokenCorpus::fromBytes(*bytes);
  std::unique_ptr<rt::SentencePieceTokenizer> sp;
  if (!tokenizerModel.empty() && llvm::sys::fs::exists(tokenizerModel)) {
    llvm::Expected<std::unique_ptr<rt::SentencePieceTokenizer>> loaded =
        rt::SentencePieceTokenizer::load(tokenizerModel);
    if (!loaded)
      return loaded.takeError();
    sp = std::move(*loaded);
  } else {
    llvm::errs() << "training a SentencePiece model of " << vocabSize
                 << " pieces on the training text\n";
    llvm::Expected<std::unique_ptr<rt::SentencePieceTokenizer>> trained =
        rt::SentencePieceTokenizer::train(*bytes, vocabSize);
    if (!trained)
      return trained.takeError();
    sp = std::move(*trained);
    if (!tokenizerModel.empty())
      if (llvm::Error error = sp->save(tokenizerModel))
        return std::move(error);
  }
  return sp->encode(*bytes);
}

} // namespace switchyard::driver

//===- Common.h - what the switchyard commands share ------------*- C++ -*-===//
//
// The option groups and helpers that several `switchyard` commands use:
// the model options every model command takes, the MLIR options every
// command shows, loading a model and running the front end on it, and
// error messages; for the commands that run a model (run, train, eval),
// the --device options, the parameter-file flags, the corpus options and
// the compilation for the chosen device.
//
// A command constructs the option groups it takes as function-local
// statics when it runs, so that only its own options are registered and
// every option is constructed after the category it names.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_TOOLS_SWITCHYARD_COMMON_H
#define SWITCHYARD_TOOLS_SWITCHYARD_COMMON_H

#include "lib/Pipelines/OptionsBinder.h"
#include "runtime/Engine/GpuProgram.h"
#include "runtime/Generation.h"
#include "runtime/ParamFiles.h"
#include "runtime/Program.h"
#include "runtime/Training.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <memory>
#include <string>

namespace switchyard::driver {

namespace cl = llvm::cl;
namespace rt = ::switchyard::runtime;

/// Parses and verifies a model definition, reporting errors with locations
/// on stderr. Returns null on failure.
mlir::OwningOpRef<mlir::ModuleOp> loadModel(mlir::MLIRContext &context,
                                            llvm::SourceMgr &sources,
                                            llvm::StringRef path);

/// Runs the front-end pipeline (the one switchyard-opt registers as
/// --switchyard-frontend-pipeline) on `module`.
mlir::LogicalResult runFrontend(mlir::ModuleOp module, int64_t numLayers);

/// Prints `error` as "switchyard: ..." and returns 1.
int fail(llvm::Error error);
int fail(const llvm::Twine &message);

/// Options every model command takes.
struct ModelOptions {
  cl::OptionCategory category;
  cl::opt<std::string> input;
  cl::opt<int64_t> numLayers;
  cl::opt<std::string> fuse;
  cl::opt<std::string> experts;

  ModelOptions();

  /// Checks the values that need no compiling.
  llvm::Error check() const;
  static constexpr int64_t kMaxLayers = 100000;

  /// The compile options these select for the CPU or the GPU, or an error
  /// naming a bad --fuse or --experts.
  llvm::Expected<rt::CompileOptions> compileOptions(bool gpu) const;
};

/// Registers MLIR's IR-printing, timing and pass-manager options (for
/// example --mlir-print-ir-after-all; they apply to every stage of the
/// compile, the runtime's included) and shows them, with `category`, in
/// --help; LLVM's many unrelated global options stay hidden. Switchyard's
/// passes are registered, as in switchyard-opt, so that
/// --mlir-print-ir-after=PASS can name them. `moreCategories` are shown
/// too (the GPU options of DeviceOption).
void registerCommandOptions(
    cl::OptionCategory &category,
    llvm::ArrayRef<const cl::OptionCategory *> moreCategories = {});

/// Sets up a context with every Switchyard dialect.
void setUpContext(mlir::MLIRContext &context);

/// Where a command runs the compiled model.
enum class Device { cpu, gpu, gpuEmulation };

/// How run, eval and train read parameter files (runtime/ParamFiles.h):
/// rename rules and whether parameters no file holds are initialised.
struct ParamFileFlags {
  cl::list<std::string> renames;
  cl::opt<bool> initMissing;
  explicit ParamFileFlags(cl::OptionCategory &category);

  llvm::Expected<rt::ParamFileOptions> options(uint64_t seed) const;
};

/// The --params option of the commands that read a trained model
/// (generate, analyze), with the parameter-file flags and the tokenizer the
/// checkpoint was trained with (--tokenizer-model; default: bytes).
struct TrainedParams {
  cl::list<std::string> files;
  ParamFileFlags flags;
  cl::opt<std::string> tokenizerModel;
  explicit TrainedParams(cl::OptionCategory &category);

  /// The SentencePiece tokenizer of --tokenizer-model, or null for bytes.
  llvm::Expected<std::unique_ptr<rt::SentencePieceTokenizer>>
  loadTokenizer() const;
};

/// The language model of `program` (compiled from `input`, one model) with
/// `files`' parameters (kept in `storage`, which must outlive it), for
/// `command`, reading bytes or, with `tokenizer`, its subwords: an error for
/// a file of several models, another model's checkpoint, a checkpoint of
/// another tokenizer, or a vocabulary other than 256 (bytes) or smaller than
/// the tokenizer's pieces. With a tokenizer the model's `pieces` are its
/// pieces.
llvm::Expected<rt::LanguageModel>
bindLanguageModel(rt::Program &program, llvm::StringRef input,
                  llvm::ArrayRef<std::string> files,
                  const rt::ParamFileOptions &options,
                  std::vector<rt::HostTensor> &storage, llvm::StringRef command,
                  const rt::SentencePieceTokenizer *tokenizer = nullptr);

/// The --device option of the commands that run a model, with the GPU
/// target's code generation options (`--gpu-<option>`, one flag per
/// GpuTargetOptions option).
struct DeviceOption {
  cl::opt<Device> device;
  cl::opt<bool> noCache;
  cl::opt<unsigned> threads;
  cl::opt<std::string> cpu;
  cl::opt<std::string> cpuFeatures;
  cl::OptionCategory gpuCategory;
  mlir::switchyard::CommandLineBinding<mlir::switchyard::GpuTargetOptions>
      gpu;
  explicit DeviceOption(cl::OptionCategory &category);

  /// The GPU options chosen, checked; an error for a GPU option that the
  /// device would ignore silently (only --gpu-chip, --gpu-block-size and
  /// --gpu-element-type apply to gpu-emulation, none to cpu).
  llvm::Expected<mlir::switchyard::GpuTargetOptions> gpuOptions() const;
};

/// What compileFor compiles beyond the model's forward function.
struct CompileRequest {
  /// The train step too (CompileOptions::trainStep).
  bool trainStep = false;
  /// The forward function's probes (CompileOptions::probes).
  bool probes = false;
  /// With trainStep: the update from given gradients too
  /// (CompileOptions::optimizerStep), for data-parallel training.
  bool optimizerStep = false;
  /// The model's decoding step over key/value caches
  /// (CompileOptions::decoder).
  bool decoder = false;
  /// Another model file with the same options; empty: the model's input.
  std::string input;
};

/// Compiles the model `model` names (or `request.input`), with its
/// --num-layers and --fuse and what `request` asks for, for the device
/// `device` selects. For the GPU, checks first that a driver and a device
/// are there, so that a machine without one fails before the compilation,
/// with the driver layer's reason. (The GPU options themselves are checked
/// by the GPU pipeline, which names the allowed values.)
llvm::Expected<std::unique_ptr<rt::Program>>
compileFor(const DeviceOption &device, const ModelOptions &model,
           const CompileRequest &request = {});

/// Options of the corpus and its tokens, shared by train and eval.
struct CorpusOptions {
  cl::list<std::string> data;
  cl::opt<double> validFraction;
  cl::opt<std::string> tokenizer;
  cl::opt<int64_t> vocabSize;
  cl::opt<std::string> tokenizerModel;
  explicit CorpusOptions(cl::OptionCategory &category);

  /// Checks the values before any text is read (load() does too; commands
  /// call it first to refuse bad values before compiling).
  llvm::Error check() const;

  /// Reads the corpus (after check()).
  llvm::Expected<rt::TokenCorpus> load() const;
};

} // namespace switchyard::driver

#endif // SWITCHYARD_TOOLS_SWITCHYARD_COMMON_H

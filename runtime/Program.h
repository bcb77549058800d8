//===- Program.h - compiled programs, on any backend ------------*- C++ -*-===//
//
// What every backend of the runtime offers: a module compiled ahead of time,
// its functions' signatures (with the `lm.*` roles of their arguments), the
// parameters its models declared, and calls on HostTensors. CpuProgram
// (runtime/Engine/CpuProgram.h) and GpuProgram (runtime/Engine/GpuProgram.h) implement it,
// so the training and evaluation loops (runtime/Training.h) run on either
// unchanged. No MLIR type crosses this header.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_RUNTIME_PROGRAM_H
#define SWITCHYARD_RUNTIME_PROGRAM_H

#include "lib/Pipelines/FusionOptions.h"
#include "lib/Pipelines/TargetOptions.h"
#include "runtime/Params.h"
#include "runtime/TensorFile.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace switchyard::runtime {

class NcclGroup;

/// What an argument of a generated function is for (from the `lm.*`
/// argument attributes of lm-differentiate and lm-build-train-step).
enum class ArgRole : uint8_t {
  /// Token ids, XL memories, or any argument of a plain function.
  data,
  /// A model parameter (`param` names it).
  param,
  /// Next-token targets of a `_grad` or `_train_step` function.
  targets,
  /// The per-step dropout seed, an i64 scalar.
  seed,
  /// AdamW's first and second moments of a parameter.
  adamM,
  adamV,
  /// The optimizer hyperparameters of a `_train_step`.
  hyper,
  /// The gradient of a parameter, for `_optimizer_step` (in parameter
  /// order, as the moments). The last role (the compile cache reads roles
  /// up to it).
  gradient,
};

/// The type of one function argument or result.
struct TensorSpec {
  ElementType type = ElementType::f32;
  /// Sizes; -1 marks a dynamic size.
  std::vector<int64_t> shape;
  /// For a model's parameter arguments: the parameter name.
  std::string param;
  /// For token-id arguments: ids must lie in [0, vocab).
  std::optional<int64_t> vocab;
  /// For arguments: what the argument is for.
  ArgRole role = ArgRole::data;
  /// For results of a model compiled with CompileOptions::probes: the probe
  /// it returns (`<layer>.attention.weights`, `<layer>.v.gates`, ...);
  /// empty for the model's own results.
  std::string probe;
};

/// The signature of one callable function.
struct FunctionSpec {
  std::string name;
  std::vector<TensorSpec> arguments;
  std::vector<TensorSpec> results;
  /// For a model's decoding step (CompileOptions::decoder): the name of the
  /// model's forward function; empty otherwise.
  std::string decoderOf;
};

/// How to compile.
struct CompileOptions {
  /// Model depth L for the scaled initialisers (0: count attention blocks).
  int64_t numLayers = 0;
  /// Also compile each model's loss-and-gradient function `<model>_grad`
  /// (see lm-differentiate): it takes the model's arguments and then the
  /// targets, and returns the loss and each parameter's gradient.
  bool gradients = false;
  /// Also compile each model's AdamW step `<model>_train_step` (see
  /// lm-build-train-step); implies `gradients`.
  bool trainStep = false;
  /// With trainStep: also `<model>_optimizer_step`, the train step's
  /// update from gradients given as arguments (ArgRole::gradient), for
  /// data-parallel training: each process's `_grad` on its part of the
  /// batch, the gradients averaged, then this.
  bool optimizerStep = false;
  /// Each distinct block compiled once, as a function called per layer
  /// (lm-outline-layers); off: every layer inline, as one straight line.
  bool outlineLayers = true;
  /// Each model's forward function also returns its probes after its own
  /// results: every attention block's softmax weights [B, H, T, S] and
  /// every router's top-k gates and experts (lm-expose-probes; what
  /// `switchyard analyze` draws), each named in TensorSpec::probe. Its
  /// layers are then compiled inline (outlineLayers is ignored).
  bool probes = false;
  /// Also compile each model's decoding step `<model>_decode`
  /// (lm-build-decoder): one token at a position against per-block
  /// key/value caches, for generation (runtime/Generation.h). Models with
  /// memories or XL positions get none.
  bool decoder = false;
  /// The fusions and the expert grouping; unset: the target's defaults
  /// (FusionOptions::targetDefault: the GPU's for the GPU backend and the
  /// GPU emulation, the CPU's otherwise). On the CPU backend the grouped
  /// formulation reads the routes' sort on the host unless
  /// `groupedTileRows` is set; the GPU backend and the GPU emulation always
  /// take the padded formulation (kGpuGroupedTileRows unless set).
  std::optional<mlir::switchyard::FusionOptions> fusion;
  /// With grouped experts: T > 0 pads each expert's rows to multiples of T
  /// and reads nothing on the host (`grouped-tile-rows`); 0: the backend's
  /// default.
  int64_t groupedTileRows = 0;
  /// LLVM optimisation level of the JIT (0-3): its IR passes and its code
  /// generation.
  unsigned optLevel = 2;
  /// CPU backend: round the factors of matmul-like contractions to "bf16" or
  /// "f16" ("f32": exact), as the GPU's tensor cores do with
  /// GpuTargetOptions::elementType; a reference for those. The GPU backend
  /// and the GPU emulation take their element type from their own options.
  std::string roundContractionOperands = "f32";
  /// CPU backend: round the factors of the flash attention that the GPU's
  /// tensor-core kernels take (head width at most 128) to "bf16" or "f16"
  /// as those kernels do (Q, K, V, the relative keys, dO, the backward
  /// pass's weights P and dS; convert-moe-to-linalg
  /// `flash-attention-rounding`);
  /// "f32": exact. A
  /// reference for the GPU's tensor-core route only: its SIMT route (sm_75)
  /// and its emulation on it round no attention factor.
  std::string roundAttentionFactors = "f32";
  /// CPU backend: run the GPU target's kernels instead of the CPU's (the GPU
  /// emulation, switchyard-gpu-emulation-pipeline, with these options):
  /// every kernel launch as loops over its blocks and threads, one thread
  /// after another (between barriers, where they cooperate). Slow; for
  /// testing the GPU route's code without a GPU. The program's backend() is
  /// then "gpu-emulation".
  std::optional<mlir::switchyard::GpuEmulationOptions> emulateGpu;
  /// CPU backend and the GPU emulation: the CPU to generate code for, an LLVM
  /// CPU name as clang's -mcpu takes (haswell, znver1, skylake-avx512,
  /// neoverse-v1, ...); empty: this machine's. The matmul kernels' register
  /// tile follows its vector registers, so a machine with AVX-512 can compile,
  /// run and time the kernels of an AVX2 machine. It must not need an
  /// instruction set extension this machine lacks (compiling fails and names
  /// them).
  std::string cpu;
  /// Features added to or taken from the CPU's, as clang's -mattr takes
  /// them: "+avx512f,-avx512vl" (with an empty `cpu`, this machine's CPU).
  std::string cpuFeatures;
  /// `cpu` and `cpuFeatures` for messages: empty for this machine's CPU,
  /// else "x86-64", "x86-64 +avx2" or "of this machine -avx512f".
  std::string describeCpu() const {
    if (cpu.empty() && cpuFeatures.empty())
      return "";
    return (cpu.empty() ? "of this machine" : cpu) +
           (cpuFeatures.empty() ? "" : " " + cpuFeatures);
  }
  /// The compile cache (runtime/CompileCache.h) to read and fill: a
  /// program compiled before with the same text and options on this
  /// machine, by this build, is loaded from it instead of compiled; empty:
  /// no cache. The CPU backend and the GPU emulation use it; the GPU
  /// backend compiles every time.
  std::string cacheDirectory;
};

/// A tensor that a backend keeps between calls, where it computes: device
/// memory on the GPU, host memory on the CPU. Made by Program::upload or
/// kept from a result by Program::callResident; it owns its memory and gives
/// it back when destroyed (on the GPU, to the driver's pool). Only the
/// backend that made it can take it as an argument.
class DeviceTensor {
public:
  virtual ~DeviceTensor();
  DeviceTensor(const DeviceTensor &) = delete;
  DeviceTensor &operator=(const DeviceTensor &) = delete;

  ElementType type() const { return elementType; }
  llvm::ArrayRef<int64_t> shape() const { return sizes; }
  int64_t numElements() const;
  /// For messages, as HostTensor::name (say, the parameter it holds).
  const std::string &name() const { return label; }
  /// The backend that holds it ("cpu" or "gpu").
  virtual llvm::StringRef backend() const = 0;

protected:
  DeviceTensor(ElementType type, std::vector<int64_t> shape, std::string name)
      : elementType(type), sizes(std::move(shape)), label(std::move(name)) {}

private:
  ElementType elementType;
  std::vector<int64_t> sizes;
  std::string label;
};

/// One argument of Program::callResident: a host tensor (copied to the
/// device for the call only) or a DeviceTensor (used where it is).
struct CallArgument {
  const HostTensor *host = nullptr;
  const DeviceTensor *device = nullptr;

  CallArgument(const HostTensor *tensor) : host(tensor) {}
  CallArgument(const DeviceTensor *tensor) : device(tensor) {}
};

/// One result of Program::callResident: in host memory, or kept where the
/// backend computed it (`device` set, `host` empty).
struct CallResult {
  HostTensor host;
  std::unique_ptr<DeviceTensor> device;
};

/// A compiled module, ready to call, on some backend.
class Program {
public:
  virtual ~Program();

  /// The callable functions, in module order.
  virtual const std::vector<FunctionSpec> &functions() const = 0;

  /// The function called `name`, or null.
  const FunctionSpec *lookup(llvm::StringRef name) const;

  /// The parameters the compiled models declared, in declaration order.
  virtual const ParamTable &params() const = 0;

  /// Calls `name` with one tensor per argument. Element types, ranks and
  /// static sizes are checked against the signature, token ids against the
  /// vocabulary; errors name the argument (and the tensor's `name`, say the
  /// file it came from, when set). Arguments are read-only. Returns the
  /// results, in host memory, owned by the caller.
  virtual llvm::Expected<std::vector<HostTensor>>
  call(llvm::StringRef name, llvm::ArrayRef<const HostTensor *> arguments) = 0;

  /// Which backend this is, for messages ("cpu" or "gpu").
  virtual llvm::StringRef backend() const = 0;

  /// Keeping tensors on the device between calls (a training loop's
  /// parameters and optimizer moments): upload once, call with a mix of
  /// handles and host tensors, keep the results that feed the next call as
  /// handles, download only what the host needs to read.
  ///
  /// The defaults serve backends that compute in host memory (the CPU): a
  /// handle holds a HostTensor, upload() and download() copy it, and
  /// callResident() is call() with kept results moved into handles, so the
  /// results are exactly call()'s. GpuProgram keeps handles in device memory.

  /// A copy of `tensor` on this backend, owned by the caller.
  virtual llvm::Expected<std::unique_ptr<DeviceTensor>>
  upload(const HostTensor &tensor);

  /// A host copy of `tensor`, which this backend made.
  virtual llvm::Expected<HostTensor> download(const DeviceTensor &tensor);

  /// Calls `name` as call() does, each argument a host tensor or a handle
  /// that this backend made (handles are checked against the signature by
  /// element type and shape; they are read-only too). Result #i stays on
  /// the backend, as a new handle owned by the caller, where `keep[i]` is
  /// true, and comes back in host memory otherwise (and past the end of
  /// `keep`).
  virtual llvm::Expected<std::vector<CallResult>>
  callResident(llvm::StringRef name, llvm::ArrayRef<CallArgument> arguments,
               llvm::ArrayRef<bool> keep);

  /// Replaces each of `tensors` (f32 handles this backend made) by its
  /// mean over the ranks of `group`, where they are: NCCL's all-reduce on
  /// the GPU backend's device memory, done when this returns. Backends
  /// that compute in host memory have no device group (an error); their
  /// ranks average on the host (Communicator::allReduceSum).
  virtual llvm::Error allReduceMean(llvm::ArrayRef<DeviceTensor *> tensors,
                                    NcclGroup &group);
};

} // namespace switchyard::runtime

#endif // SWITCHYARD_RUNTIME_PROGRAM_H

//===- Bench.h - what switchyard-bench's benchmarks share -------*- C++ -*-===//
//
// switchyard-bench has three benchmarks (the SwitchHead layer, the layer's
// ops one by one, and whole training steps); they share the options, the
// compilation for the chosen backend, timing with the tensors resident where
// the backend computes, the PyTorch peer scripts, and the cross-checks that
// every timed implementation computes the same thing.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_BENCH_BENCH_H
#define SWITCHYARD_BENCH_BENCH_H

#include "lib/Pipelines/TargetOptions.h"
#include "lib/Reference/Reference.h"
#include "runtime/Program.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace switchyard::bench {

namespace rt = switchyard::runtime;
namespace ref = switchyard::reference;

/// The command line, as parsed by switchyard-bench.cpp.
struct Options {
  std::string config;
  int64_t batch = 2;
  unsigned reps = 5;
  /// "cpu" or "gpu".
  std::string device = "cpu";
  /// GPU code generation (with device "gpu").
  mlir::switchyard::GpuTargetOptions gpuTarget;
  /// The CPU that the CPU code is generated for (CompileOptions::cpu and
  /// cpuFeatures); empty: this machine's.
  std::string cpu, cpuFeatures;
  /// Python with PyTorch; empty: no PyTorch peers.
  std::string python;
  std::string layerScript, kernelScript, stepScript;
  std::vector<unsigned> torchThreads;
  bool skipReference = false;
  /// Only compile (the train-step benchmark: compile times without a GPU).
  bool compileOnly = false;
  /// Every layer compiled inline rather than once per distinct block
  /// (CompileOptions::outlineLayers off): the program structure before
  /// lm-outline-layers, for comparison.
  bool inlineLayers = false;
  std::vector<std::string> fusions;
  std::string jsonOut;

  bool gpu() const { return device == "gpu"; }
  /// Whether matmul factors are rounded to 16 bits (tensor cores).
  bool lowPrecision() const {
    return gpu() && gpuTarget.elementType != "f32";
  }
};

[[noreturn]] void fail(const llvm::Twine &message);

template <typename T>
T check(llvm::Expected<T> value, const llvm::Twine &what) {
  if (!value)
    fail(what + ": " + llvm::toString(value.takeError()));
  return std::move(*value);
}

/// Milliseconds of the median of `reps` timed runs of `run` (at least one),
/// after one untimed warm-up run.
double medianMs(unsigned reps, llvm::function_ref<void()> run);

/// The fusion setting of the CPU's unfused route with the expert
/// projections dense over all experts (`switchyard --experts=dense`); in
/// the others the CPU's are grouped by expert, its default.
inline constexpr llvm::StringLiteral kDenseExperts = "dense";

/// The fusion setting with the router and attention fused and the expert
/// projections unfused and grouped by expert (`switchyard --fuse
/// router,attention --experts grouped`): on the GPU the padded formulation
/// on tensor cores (moe.grouped_matmul / moe.grouped_weight_grad), the
/// route to the paper's k/E of the dense MACs; the fused expert-projection
/// kernels are one thread per row.
inline constexpr llvm::StringLiteral kGroupedExperts = "grouped";

/// The device's default setting without switchyard-fuse-rows (`switchyard
/// --fuse` of the default list less `rows`): what fusing rows buys.
inline constexpr llvm::StringLiteral kWithoutRows = "no-rows";

/// The device's default setting with the mission's fusions on: the router
/// (moe-fuse-router) and the expert projections (moe-fuse-expert-projection)
/// fused, whatever else the default fuses.
inline constexpr llvm::StringLiteral kMoeFusion = "moe";

/// The compile options (with gradients) of a fusion setting: default (the
/// device's own, FusionOptions::targetDefault), all, none, kGroupedExperts,
/// kWithoutRows, kMoeFusion or, on the CPU, kDenseExperts.
rt::CompileOptions compileOptions(const Options &options, llvm::StringRef fuse);

/// The compiler target whose defaults the options' device takes.
inline mlir::switchyard::Target target(const Options &options) {
  return options.gpu() ? mlir::switchyard::Target::Gpu
                       : mlir::switchyard::Target::Cpu;
}

/// A row label for a fusion setting: "fused" (all), "unfused" (none), or
/// "default: <the fusions>" where the device's default is neither.
std::string fusionLabel(const Options &options, llvm::StringRef fuse);

/// Compiles MLIR source for the options' backend; sets `compileMs` to the
/// time from source text to callable code (kernels and host code).
std::unique_ptr<rt::Program> compile(const Options &options,
                                     llvm::StringRef source,
                                     llvm::StringRef bufferName,
                                     const rt::CompileOptions &compile,
                                     double &compileMs);

/// The machine the compiled code runs on, for the report's header: the CPU
/// model, or the GPU's name, chip and multiplicand type.
std::string describeBackend(const Options &options);
std::string cpuModel();

/// Times `function` of `program`: the arguments are made resident first
/// (device memory on the GPU), every timed call keeps its results resident
/// (the GPU backend returns once its stream has finished), and the results
/// of the last call are returned in host memory in `results`.
double timeCall(const Options &options, rt::Program &program,
                llvm::StringRef function,
                llvm::ArrayRef<const rt::HostTensor *> arguments,
                std::vector<rt::HostTensor> &results);

/// One implementation's numbers.
struct Measurement {
  std::string name;
  double forwardMs = NAN, fwdbwdMs = NAN, loss = NAN;
  std::map<std::string, double> gradNorms;
  /// A peer of equal FLOPs but other equations: not cross-checked.
  bool equalFlops = false;
  /// Set by crossCheck when it computes something else than the baseline.
  std::string mismatch;
};

double l2(const rt::HostTensor &tensor);

/// Compares `m` with `base`: the loss to `lossTolerance` relative and every
/// gradient norm both have to `gradTolerance`. Sets m.mismatch (and
/// returns false) where they differ.
bool crossCheck(const Measurement &base, Measurement &m, double lossTolerance,
                double gradTolerance);

/// The tolerances for the options: f32 sums in another order, or 16-bit
/// matmul factors (GPU tensor cores, or PyTorch's bf16 autocast).
double lossTolerance(const Options &options);
double gradTolerance(const Options &options);

/// Runs `options.python` on `script` with `arguments` and parses the JSON
/// object it prints. OMP_WAIT_POLICY is PASSIVE unless set (PyTorch's
/// OpenMP threads then sleep rather than spin between parallel regions).
llvm::json::Object runPython(const Options &options, llvm::StringRef script,
                             llvm::ArrayRef<std::string> arguments);

/// One row "PyTorch <formulation>" per entry of a peer script's
/// {"results": {formulation: {"forward_ms", "fwdbwd_ms", "loss",
/// "grad_norms", "equal_flops"}}, "skipped": {formulation: reason}}; the
/// skipped ones are reported on stderr after `context`.
std::vector<Measurement> torchRows(const llvm::json::Object &report,
                                   llvm::StringRef context);

/// The PyTorch device and dtype arguments for the options.
std::vector<std::string> torchDeviceArguments(const Options &options);

/// The PyTorch thread counts to measure: --torch-threads, else 1 and (on
/// the CPU) every core.
std::vector<unsigned> torchThreadCounts(const Options &options);

/// The program's parameters as `rt::initialize` sets them for `seed`, f32,
/// in declaration order.
std::vector<rt::HostTensor> initialParams(const rt::Program &program,
                                          uint64_t seed);

/// A new temporary directory for a peer script's inputs.
llvm::SmallString<128> peerDirectory();

/// Writes `tensor` to `dir`/<its name>.npy.
void writeNpyInto(llvm::StringRef dir, const rt::HostTensor &tensor);

/// An f32 tensor as the C++ reference takes it.
ref::Tensor toReference(const rt::HostTensor &tensor);

/// "3.72x", or "-" where either time is missing.
std::string ratio(double peer, double ours);

/// Writes `value` to `path` (the --json option).
void writeJson(llvm::StringRef path, llvm::json::Value value);

/// A JSON number, or null for NaN.
llvm::json::Value number(double value);

/// The benchmarks; each returns the exit status.
int runLayer(const Options &options);
int runKernels(const Options &options, llvm::StringRef file);
int runTrainSteps(const Options &options,
                  llvm::ArrayRef<std::string> models);

} // namespace switchyard::bench

#endif // SWITCHYARD_BENCH_BENCH_H

//===- Bench.cpp - what switchyard-bench's benchmarks share ---------------===//

#include "bench/Bench.h"

#include "runtime/Engine/CpuProgram.h"
#include "runtime/ComputeThreads.h"
#include "runtime/Params.h"
#include "runtime/TensorFile.h"
#ifdef SWITCHYARD_HAVE_GPU_RUNTIME
#include "runtime/CudaDriver.h"
#include "runtime/Engine/GpuProgram.h"
#endif

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <unistd.h>

using namespace switchyard;
using namespace switchyard::bench;
using llvm::formatv;

using Clock = std::chrono::steady_clock;

static double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

void bench::fail(const llvm::Twine &message) {
  llvm::outs().flush();
  llvm::errs() << "switchyard-bench: error: " << message << "\n";
  std::exit(1);
}

double bench::medianMs(unsigned reps, llvm::function_ref<void()> run) {
  run();
  std::vector<double> times;
  for (unsigned i = 0; i < std::max(1u, reps); ++i) {
    Clock::time_point start = Clock::now();
    run();
    times.push_back(millisecondsSince(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// The setting `fuse` stands for: on the GPU, `default` is `grouped`
/// (FusionOptions::targetDefault).
static llvm::StringRef resolveSetting(const Options &options,
                                      llvm::StringRef fuse) {
  return fuse == "default" && options.gpu() ? llvm::StringRef(kGroupedExperts)
                                             : fuse;
}

rt::CompileOptions bench::compileOptions(const Options &options,
                                         llvm::StringRef fuse) {
  rt::CompileOptions compile;
  compile.gradients = true;
  compile.cpu = options.cpu;
  compile.cpuFeatures = options.cpuFeatures;
  compile.outlineLayers = !options.inlineLayers;
  // The setting as switchyard's --fuse and --experts: the CPU's unfused
  // expert projections are grouped by expert (its default) unless the
  // setting is `dense`; the GPU's only with `grouped` (its `none` row is
  // the dense route).
  fuse = resolveSetting(options, fuse);
  llvm::StringRef fusions = fuse;
  llvm::StringRef experts = options.gpu() ? "dense" : "default";
  if (fuse == kDenseExperts) {
    fusions = "none";
    experts = "dense";
  } else if (fuse == kGroupedExperts) {
    fusions = "router,attention,elementwise,rows";
    experts = "grouped";
  }
  bool withoutRows = fuse == kWithoutRows, moe = fuse == kMoeFusion;
  if (withoutRows || moe) {
    fusions = "default";
    experts = "default";
  }
  compile.fusion = check(
      mlir::switchyard::resolveFusions(fusions, experts, target(options)),
      "--fuse");
  if (withoutRows)
    compile.fusion->rows = false;
  if (moe)
    compile.fusion->router = compile.fusion->expertProjection = true;
  return compile;
}

std::string bench::fusionLabel(const Options &options, llvm::StringRef fuse) {
  fuse = resolveSetting(options, fuse);
  if (fuse == kDenseExperts)
    return "unfused, dense experts";
  if (fuse == kGroupedExperts)
    return "grouped experts";
  if (fuse == kWithoutRows)
    return "default without rows";
  if (fuse == kMoeFusion)
    return "moe: router, experts fused";
  std::string fusions = mlir::switchyard::describeFusions(
      check(mlir::switchyard::resolveFusions(fuse, "default", target(options)),
            "--fuse"));
  if (fusions == "all")
    return "fused";
  if (fusions == "none")
    return "unfused";
  return "default: " + fusions;
}

std::unique_ptr<rt::Program> bench::compile(const Options &options,
                                            llvm::StringRef source,
                                            llvm::StringRef bufferName,
                                            const rt::CompileOptions &compile,
                                            double &compileMs) {
  Clock::time_point start = Clock::now();
  std::unique_ptr<rt::Program> program;
  if (!options.gpu()) {
    program = check(rt::CpuProgram::compile(source, bufferName, compile),
                    "compile " + bufferName);
  } else {
#ifdef SWITCHYARD_HAVE_GPU_RUNTIME
    program = check(rt::GpuProgram::compile(source, bufferName, compile,
                                            options.gpuTarget),
                    "compile " + bufferName + " for the GPU");
#else
    fail("--device gpu: this switchyard-bench was built without the CUDA "
         "toolkit");
#endif
  }
  compileMs = millisecondsSince(start);
  return program;
}

std::string bench::cpuModel() {
  auto buffer = llvm::MemoryBuffer::getFileAsStream("/proc/cpuinfo");
  if (!buffer)
    return "unknown CPU";
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines)
    if (line.starts_with("model name"))
      return line.split(':').second.trim().str();
  return "unknown CPU";
}

std::string bench::describeBackend(const Options &options) {
  rt::CompileOptions target;
  target.cpu = options.cpu;
  target.cpuFeatures = options.cpuFeatures;
  std::string cpu = target.describeCpu();
  if (!options.gpu())
    return formatv("CPU: {0} ({1} cores; the compiled code's parallel loops "
                   "on {2} thread{3}{4})",
                   cpuModel(), std::thread::hardware_concurrency(),
                   rt::computeThreads(), rt::computeThreads() == 1 ? "" : "s",
                   cpu.empty() ? "" : "; code for CPU " + cpu);
  std::string kernels = formatv(
      "{0} multiplicands ({1}), f32 accumulation",
      options.gpuTarget.elementType,
      options.gpuTarget.usesTensorCores() ? "tensor cores" : "SIMT");
#ifdef SWITCHYARD_HAVE_GPU_RUNTIME
  if (rt::cuda::Driver::available()) {
    llvm::Expected<rt::cuda::Driver &> driver = rt::cuda::Driver::get();
    if (!driver)
      fail("CUDA driver: " + llvm::toString(driver.takeError()));
    const rt::cuda::DeviceInfo &device = driver->device();
    return formatv("GPU: {0} (sm_{1}, {2} multiprocessors, driver {3}); "
                   "kernels for {4}, {5}",
                   device.name, device.computeCapability,
                   device.multiprocessors, device.driverVersion,
                   options.gpuTarget.chip.empty()
                       ? rt::defaultChip(device.computeCapability)
                       : options.gpuTarget.chip,
                   kernels);
  }
#endif
  return formatv("GPU: none here (compile only); kernels for {0}, {1}",
                 options.gpuTarget.chipOrDefault(),
                 kernels);
}

double bench::timeCall(const Options &options, rt::Program &program,
                       llvm::StringRef function,
                       llvm::ArrayRef<const rt::HostTensor *> arguments,
                       std::vector<rt::HostTensor> &results) {
  const rt::FunctionSpec *spec = program.lookup(function);
  if (!spec)
    fail("no function @" + function);
  std::vector<std::unique_ptr<rt::DeviceTensor>> resident;
  std::vector<rt::CallArgument> args;
  for (const rt::HostTensor *argument : arguments) {
    resident.push_back(check(program.upload(*argument), "upload"));
    args.emplace_back(resident.back().get());
  }
  llvm::SmallVector<bool> keep(spec->results.size(), true);
  std::vector<rt::CallResult> out;
  double ms = medianMs(options.reps, [&] {
    out = check(program.callResident(function, args, keep),
                "call @" + function);
  });
  results.clear();
  for (rt::CallResult &result : out)
    results.push_back(check(program.download(*result.device), "download"));
  return ms;
}

double bench::l2(const rt::HostTensor &tensor) {
  double sum = 0;
  for (float v : tensor.values<float>())
    sum += double(v) * v;
  return std::sqrt(sum);
}

bool bench::crossCheck(const Measurement &base, Measurement &m,
                       double lossTolerance, double gradTolerance) {
  if (m.equalFlops)
    return true;
  auto close = [](double a, double b, double relative) {
    return std::abs(a - b) <=
           1e-5 + relative * std::max(std::abs(a), std::abs(b));
  };
  bool noLoss = std::isnan(base.loss) && std::isnan(m.loss);
  if (!noLoss && !close(base.loss, m.loss, lossTolerance)) {
    m.mismatch = formatv("loss {0:e}, {1} {2:e}", m.loss, base.name,
                         base.loss);
    return false;
  }
  for (const auto &[name, norm] : m.gradNorms) {
    auto found = base.gradNorms.find(name);
    if (found != base.gradNorms.end() &&
        !close(found->second, norm, gradTolerance)) {
      m.mismatch = formatv("|d{0}| = {1:e}, {2}: {3:e}", name, norm,
                           base.name, found->second);
      return false;
    }
  }
  return true;
}

// f32: the same sums in another order; 1e-3 on gradient norms allows a
// router near-tie to fall the other way (the 262M shapes have such ties).
// 16-bit factors: bf16 keeps 8 bits of mantissa (relative rounding 2^-9 per
// factor); the losses agree to about 1e-3 and the norms to about 1e-2 when
// the equations are the same, and a wrong equation is off by far more.
double bench::lossTolerance(const Options &options) {
  return options.lowPrecision() ? 2e-2 : 1e-4;
}
double bench::gradTolerance(const Options &options) {
  return options.lowPrecision() ? 1e-1 : 1e-3;
}

llvm::json::Object bench::runPython(const Options &options,
                                    llvm::StringRef script,
                                    llvm::ArrayRef<std::string> arguments) {
  llvm::SmallString<128> out;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "switchyard-bench-torch", "json", out))
    fail("cannot create a temporary file: " + ec.message());
  // ExecuteAndWait does not search PATH: resolve a bare name first.
  std::string program = options.python;
  if (!llvm::StringRef(program).contains('/')) {
    llvm::ErrorOr<std::string> found =
        llvm::sys::findProgramByName(options.python);
    if (!found)
      fail("--python: no " + options.python + " on PATH");
    program = *found;
  }
  std::vector<llvm::StringRef> argv = {program, script};
  for (const std::string &argument : arguments)
    argv.push_back(argument);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, out.str(),
                                                std::nullopt};
  // PyTorch's OpenMP threads spin between parallel regions, on the cores
  // OpenBLAS's own threads need for the matmuls in between: on two cores its
  // training step took twice as long on two threads as on one. Its best
  // setting is the fair peer, so the spin is off unless the caller sets it.
  std::vector<std::string> environment;
  for (char **entry = environ; *entry; ++entry)
    environment.push_back(*entry);
  if (!std::getenv("OMP_WAIT_POLICY"))
    environment.push_back("OMP_WAIT_POLICY=PASSIVE");
  std::vector<llvm::StringRef> env(environment.begin(), environment.end());
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(program, argv, env, redirects, 0, 0,
                                     &message);
  if (rc != 0) {
    llvm::sys::fs::remove(out);
    fail(formatv("{0} {1} failed (exit {2}) {3}; is PyTorch installed "
                 "(bench/cpu.sh installs Debian's python3-torch)? --python= "
                 "skips PyTorch",
                 options.python, script, rc, message));
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(out, /*IsText=*/true);
  if (!buffer)
    fail("cannot read " + out + ": " + buffer.getError().message());
  llvm::json::Value report =
      check(llvm::json::parse((*buffer)->getBuffer()), "parse " + script +
                                                           "'s report");
  llvm::sys::fs::remove(out);
  if (!report.getAsObject())
    fail(script + " printed no JSON object");
  return std::move(*report.getAsObject());
}

std::vector<Measurement> bench::torchRows(const llvm::json::Object &report,
                                          llvm::StringRef context) {
  std::vector<Measurement> rows;
  if (const llvm::json::Object *results = report.getObject("results"))
    for (const auto &[form, value] : *results) {
      const llvm::json::Object *r = value.getAsObject();
      if (!r)
        continue;
      Measurement m;
      m.name = "PyTorch " + form.str();
      m.forwardMs = r->getNumber("forward_ms").value_or(NAN);
      m.fwdbwdMs = r->getNumber("fwdbwd_ms").value_or(NAN);
      m.loss = r->getNumber("loss").value_or(NAN);
      m.equalFlops = r->getBoolean("equal_flops").value_or(false);
      if (m.equalFlops)
        m.name += " (equal FLOPs)";
      if (const llvm::json::Object *norms = r->getObject("grad_norms"))
        for (const auto &[name, norm] : *norms)
          m.gradNorms[name.str()] = norm.getAsNumber().value_or(NAN);
      rows.push_back(std::move(m));
    }
  if (const llvm::json::Object *skipped = report.getObject("skipped"))
    for (const auto &[form, reason] : *skipped)
      llvm::errs() << formatv("{0}PyTorch {1}: skipped ({2})\n", context,
                              form.str(), reason.getAsString().value_or("?"));
  return rows;
}

std::vector<std::string> bench::torchDeviceArguments(const Options &options) {
  return {"--device", options.gpu() ? "cuda" : "cpu", "--dtype",
          options.lowPrecision() ? "bf16" : "f32"};
}

std::vector<unsigned> bench::torchThreadCounts(const Options &options) {
  std::vector<unsigned> threads(options.torchThreads);
  if (threads.empty()) {
    threads.push_back(1);
    if (!options.gpu() && std::thread::hardware_concurrency() > 1)
      threads.push_back(std::thread::hardware_concurrency());
  }
  return threads;
}

std::vector<rt::HostTensor> bench::initialParams(const rt::Program &program,
                                                 uint64_t seed) {
  std::vector<rt::HostTensor> params;
  for (const rt::ParamSpec &spec : program.params().params) {
    std::vector<float> values(size_t(spec.numElements()));
    rt::initialize(spec, seed, values);
    params.push_back(rt::HostTensor::fromValues<float>(
        spec.name, rt::ElementType::f32, spec.shape, values));
  }
  return params;
}

llvm::SmallString<128> bench::peerDirectory() {
  llvm::SmallString<128> dir;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("switchyard-bench", dir))
    fail("cannot create a temporary directory: " + ec.message());
  return dir;
}

void bench::writeNpyInto(llvm::StringRef dir, const rt::HostTensor &tensor) {
  if (llvm::Error e =
          rt::writeNpy((dir + "/" + tensor.name + ".npy").str(), tensor))
    fail(llvm::toString(std::move(e)));
}

ref::Tensor bench::toReference(const rt::HostTensor &tensor) {
  auto values = tensor.values<float>();
  return ref::Tensor::fromData(tensor.shape, {values.begin(), values.end()});
}

std::string bench::ratio(double peer, double ours) {
  if (std::isnan(peer) || std::isnan(ours))
    return "-";
  return formatv("{0:F2}x", peer / ours);
}

llvm::json::Value bench::number(double value) {
  return std::isnan(value) ? llvm::json::Value(nullptr)
                           : llvm::json::Value(value);
}

void bench::writeJson(llvm::StringRef path, llvm::json::Value value) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    fail("cannot write " + path + ": " + ec.message());
  os << formatv("{0:2}", value) << "\n";
}

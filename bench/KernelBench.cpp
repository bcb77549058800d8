//===- KernelBench.cpp - the layer's ops one by one, against PyTorch ------===//
//
// switchyard-bench --kernels FILE: every function of FILE (one moe op and a
// cross-entropy loss over its output, e.g. bench/Inputs/kernels-47m.mlir)
// and its loss-and-gradient function, compiled fused and unfused for the
// CPU or the GPU and timed on seeded random arguments; with PyTorch, the
// same functions in PyTorch (bench/torch_kernels.py: per-expert loop,
// dense-all-experts, a plain torch.mm of equal FLOPs, the attention
// backends of scaled_dot_product_attention) on the same arguments, with the
// matmul peak measured in the same run. Every implementation but the
// equal-FLOPs matmul is cross-checked (loss and gradient norms).
//
//===----------------------------------------------------------------------===//

#include "bench/Bench.h"
#include "lib/InitSwitchyard.h"
#include "dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <random>

using namespace switchyard;
using namespace switchyard::bench;
using llvm::formatv;

namespace {

/// What the benchmark reads off one function's IR.
struct KernelInfo {
  /// Useful FLOPs of the forward function and of its loss-and-gradient
  /// function (NaN where a size is dynamic).
  double forwardFlops = 0, gradFlops = 0;
  /// What the PyTorch script needs beyond the arguments' shapes.
  llvm::json::Object attrs;
};

/// Whether `value` is an argument of `func` that is differentiated
/// (`lm.param`).
bool isParam(mlir::func::FuncOp func, mlir::Value value) {
  auto arg = llvm::dyn_cast<mlir::BlockArgument>(value);
  return arg && arg.getOwner()->getParentOp() == func &&
         func.getArgAttr(arg.getArgNumber(), "lm.param");
}

int64_t size(mlir::Value value, unsigned dim) {
  return llvm::cast<mlir::ShapedType>(value.getType()).getDimSize(dim);
}

/// FLOPs (2 per multiply-accumulate) of the matmul-like moe ops in `func`.
/// A backward pass costs one forward pass for each of the op's two matmul
/// operands that is differentiated (dX and dW); attention counts the query
/// and key-value sides, and only the query-key pairs the causal mask
/// allows, as FlashAttention's benchmarks do.
KernelInfo analyze(mlir::func::FuncOp func) {
  KernelInfo info;
  auto add = [&](double flops, mlir::Value a, mlir::Value b) {
    info.forwardFlops += flops;
    info.gradFlops += flops * (1 + isParam(func, a) + isParam(func, b));
  };
  func.walk([&](mlir::Operation *op) {
    if (auto linear = llvm::dyn_cast<mlir::moe::LinearOp>(op)) {
      add(2.0 * size(linear.getInput(), 0) * size(linear.getInput(), 1) *
              size(linear.getWeight(), 0),
          linear.getInput(), linear.getWeight());
      info.attrs["scale"] = linear.getScale().convertToDouble();
    } else if (auto gate = llvm::dyn_cast<mlir::moe::GateOp>(op)) {
      add(2.0 * size(gate.getInput(), 0) * size(gate.getInput(), 1) *
              size(gate.getWeight(), 0),
          gate.getInput(), gate.getWeight());
      auto result = llvm::cast<mlir::ShapedType>(gate.getType());
      if (result.getRank() == 3)
        info.attrs["heads"] = result.getDimSize(1);
    } else if (auto topk = llvm::dyn_cast<mlir::moe::TopKOp>(op)) {
      info.attrs["k"] = int64_t(topk.getK());
    } else if (auto proj = llvm::dyn_cast<mlir::moe::ExpertProjOp>(op)) {
      // N · H·k · D · F.
      add(2.0 * size(proj.getInput(), 0) * size(proj.getGates(), 1) *
              size(proj.getGates(), 2) * size(proj.getInput(), 1) *
              size(proj.getWeight(), 2),
          proj.getInput(), proj.getWeight());
    } else if (auto merge = llvm::dyn_cast<mlir::moe::ExpertMergeOp>(op)) {
      add(2.0 * size(merge.getHeads(), 0) * size(merge.getGates(), 1) *
              size(merge.getGates(), 2) * size(merge.getHeads(), 2) *
              size(merge.getWeight(), 2),
          merge.getHeads(), merge.getWeight());
    } else if (auto attention = llvm::dyn_cast<mlir::moe::AttentionOp>(op)) {
      double b = size(attention.getQuery(), 0),
             t = size(attention.getQuery(), 1),
             h = size(attention.getQuery(), 2),
             f = size(attention.getQuery(), 3),
             s = size(attention.getKey(), 1);
      // Query t sees the S - T memory keys and the t + 1 keys up to itself.
      double pairs = t * (s - t) + t * (t + 1) / 2;
      double products = attention.getRel() ? 3 : 2;
      add(2.0 * b * h * f * pairs * products, attention.getQuery(),
          attention.getKey());
    }
  });
  if (info.forwardFlops < 0)
    info.forwardFlops = info.gradFlops = NAN; // a dynamic size (-1)
  return info;
}

/// Seeded random arguments for `function`: token ids and indices uniform in
/// [0, vocab), floats uniform in [-1, 1]; dynamic sizes become 1.
std::vector<rt::HostTensor> randomArguments(const rt::FunctionSpec &function) {
  std::mt19937 rng(11);
  std::vector<rt::HostTensor> args;
  for (const rt::TensorSpec &spec : function.arguments) {
    std::vector<int64_t> shape = spec.shape;
    int64_t count = 1;
    for (int64_t &size : shape) {
      size = size < 0 ? 1 : size;
      count *= size;
    }
    if (spec.type == rt::ElementType::i32) {
      std::uniform_int_distribution<int32_t> id(
          0, int32_t(spec.vocab.value_or(1) - 1));
      std::vector<int32_t> values(size_t(count), 0);
      for (int32_t &v : values)
        v = id(rng);
      args.push_back(rt::HostTensor::fromValues<int32_t>(
          "", rt::ElementType::i32, shape, values));
    } else if (spec.type == rt::ElementType::i64) {
      args.push_back(rt::HostTensor::fromValues<int64_t>(
          "", rt::ElementType::i64, shape,
          std::vector<int64_t>(size_t(count), 1)));
    } else {
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      std::vector<float> values(static_cast<size_t>(count));
      for (float &v : values)
        v = uniform(rng);
      args.push_back(rt::HostTensor::fromValues<float>(
          "", rt::ElementType::f32, shape, values));
    }
  }
  return args;
}

/// One function's rows.
struct Kernel {
  std::string name;
  KernelInfo info;
  std::vector<rt::HostTensor> arguments;
  const rt::FunctionSpec *spec = nullptr;
  bool hasGrad = false;
  std::vector<Measurement> rows;
};

/// Times every function of `program` and its _grad; adds one row per
/// function to `kernels` (made on the first call).
void measureProgram(const Options &options, rt::Program &program,
                    llvm::StringRef label,
                    const std::map<std::string, KernelInfo> &infos,
                    std::vector<Kernel> &kernels) {
  bool first = kernels.empty();
  size_t index = 0;
  for (const rt::FunctionSpec &f : program.functions()) {
    if (llvm::StringRef(f.name).ends_with("_grad"))
      continue;
    if (first) {
      Kernel kernel;
      kernel.name = f.name;
      auto found = infos.find(f.name);
      if (found != infos.end())
        kernel.info = found->second;
      kernel.arguments = randomArguments(f);
      kernels.push_back(std::move(kernel));
    }
    Kernel &kernel = kernels[index++];
    kernel.spec = &f;
    std::vector<const rt::HostTensor *> pointers;
    for (const rt::HostTensor &a : kernel.arguments)
      pointers.push_back(&a);
    Measurement m;
    m.name = ("switchyard (" + label + ")").str();
    std::vector<rt::HostTensor> results;
    m.forwardMs = timeCall(options, program, f.name, pointers, results);
    if (results.size() == 1 && results[0].numElements() == 1)
      m.loss = results[0].values<float>()[0];
    if (const rt::FunctionSpec *grad = program.lookup(f.name + "_grad")) {
      kernel.hasGrad = true;
      m.fwdbwdMs = timeCall(options, program, grad->name, pointers, results);
      size_t next = 1;
      for (const rt::TensorSpec &arg : f.arguments)
        if (arg.role == rt::ArgRole::param)
          m.gradNorms[arg.param] = l2(results[next++]);
    }
    kernel.rows.push_back(std::move(m));
  }
}

/// Writes every function's arguments and manifest.json for
/// bench/torch_kernels.py.
void exportKernels(const Options &options, llvm::StringRef dir,
                   const std::vector<Kernel> &kernels) {
  llvm::json::Array functions;
  for (const Kernel &kernel : kernels) {
    if (!kernel.hasGrad)
      continue; // not a loss over parameters: nothing to compare
    llvm::json::Array args;
    for (auto [index, tensor] : llvm::enumerate(kernel.arguments)) {
      std::string file = formatv("{0}.{1}.npy", kernel.name, index);
      if (llvm::Error e = rt::writeNpy((dir + "/" + file).str(), tensor))
        fail(llvm::toString(std::move(e)));
      const rt::TensorSpec &spec = kernel.spec->arguments[index];
      args.push_back(llvm::json::Object{
          {"file", file},
          {"param", spec.role == rt::ArgRole::param
                        ? llvm::json::Value(spec.param)
                        : llvm::json::Value(nullptr)}});
    }
    functions.push_back(llvm::json::Object{
        {"name", kernel.name},
        {"args", std::move(args)},
        {"attrs", llvm::json::Object(kernel.info.attrs)}});
  }
  writeJson((dir + "/manifest.json").str(),
            llvm::json::Object{{"reps", int64_t(options.reps)},
                               {"functions", std::move(functions)}});
}

/// Adds PyTorch's rows to `kernels`; returns the peak matmul TFLOP/s for
/// the options' element type that the script measured (NaN if none).
double measureTorch(const Options &options, std::vector<Kernel> &kernels,
                    std::string &peakLine) {
  llvm::SmallString<128> dir = peerDirectory();
  exportKernels(options, dir, kernels);
  unsigned threads =
      options.torchThreads.empty() ? 1 : options.torchThreads.front();
  std::vector<std::string> args = {dir.str().str(), "--threads",
                                   std::to_string(threads), "--peak"};
  llvm::append_range(args, torchDeviceArguments(options));
  llvm::json::Object report = runPython(options, options.kernelScript, args);
  llvm::sys::fs::remove_directories(dir);

  double peak = NAN;
  if (const llvm::json::Object *p = report.getObject("peak")) {
    double bf16 = p->getNumber("bf16_tflops").value_or(NAN),
           f32 = p->getNumber("f32_tflops").value_or(NAN),
           tf32 = p->getNumber("tf32_tflops").value_or(NAN);
    peak = options.lowPrecision() ? bf16 : f32;
    std::string shape;
    if (const llvm::json::Array *s = p->getArray("shape"))
      for (const llvm::json::Value &v : *s)
        shape += (shape.empty() ? "" : "x") +
                 std::to_string(v.getAsInteger().value_or(0));
    peakLine = formatv("matmul peak measured in this run (PyTorch {0} on {1}, "
                       "torch.mm {2}): bf16 {3:F1}, tf32 {4:F1}, f32 "
                       "{5:F1} TFLOP/s",
                       report.getString("torch").value_or("?"),
                       report.getString("device").value_or("?"), shape, bf16,
                       tf32, f32);
  }
  const llvm::json::Object *functions = report.getObject("functions");
  for (Kernel &kernel : kernels) {
    const llvm::json::Object *f =
        functions ? functions->getObject(kernel.name) : nullptr;
    if (!f)
      continue;
    for (Measurement &m : torchRows(*f, kernel.name + ": "))
      kernel.rows.push_back(std::move(m));
  }
  return peak;
}

std::string tflops(double flops, double ms) {
  if (std::isnan(flops) || std::isnan(ms) || flops == 0)
    return "-";
  return formatv("{0:F3}", flops / (ms * 1e9));
}

std::string percent(double flops, double ms, double peak) {
  if (std::isnan(flops) || std::isnan(ms) || std::isnan(peak) || flops == 0)
    return "-";
  return formatv("{0:F1}%", 100.0 * flops / (ms * 1e9) / peak);
}

} // namespace

int bench::runKernels(const Options &options, llvm::StringRef file) {
  // The IR itself, for the FLOPs and the attributes PyTorch needs.
  mlir::DialectRegistry registry;
  mlir::switchyard::registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(file, &context);
  if (!module)
    fail("cannot parse " + file);
  std::map<std::string, KernelInfo> infos;
  module->walk([&](mlir::func::FuncOp func) {
    infos[func.getSymName().str()] = analyze(func);
  });

  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> source =
      llvm::MemoryBuffer::getFile(file, /*IsText=*/true);
  if (!source)
    fail("cannot read " + file + ": " + source.getError().message());
  llvm::outs() << formatv("The functions of {0}, forward and "
                          "loss-and-gradient (_grad)\n{1}\n\n",
                          file, describeBackend(options));
  llvm::outs().flush();

  std::vector<Kernel> kernels;
  std::vector<std::unique_ptr<rt::Program>> programs;
  std::string compileTimes;
  for (const std::string &fuse : options.fusions) {
    double compileMs = 0;
    std::string label = fusionLabel(options, fuse);
    programs.push_back(compile(options, (*source)->getBuffer(), file,
                               compileOptions(options, fuse), compileMs));
    compileTimes += formatv("{0}{1:F0} ms {2}", compileTimes.empty() ? "" : ", ",
                            compileMs, label);
    measureProgram(options, *programs.back(), label, infos, kernels);
  }
  std::string peakLine;
  double peak = NAN;
  if (!options.python.empty())
    peak = measureTorch(options, kernels, peakLine);

  bool mismatched = false;
  llvm::json::Array entries;
  llvm::outs() << formatv("{0,-34} {1,9} {2,9} {3,9} {4,9} {5,7} {6,7} "
                          "{7,7}\n",
                          "function / implementation", "fwd ms", "grad ms",
                          "fwd TF/s", "grad TF/s", "% peak", "fwd x",
                          "grad x");
  for (Kernel &kernel : kernels) {
    const KernelInfo &info = kernel.info;
    llvm::outs() << formatv("{0}: {1:F3} GFLOP forward, {2:F3} GFLOP "
                            "loss-and-gradient\n",
                            kernel.name, info.forwardFlops / 1e9,
                            info.gradFlops / 1e9);
    const Measurement &ours = kernel.rows.front();
    for (Measurement &m : kernel.rows) {
      if (&m != &ours &&
          !crossCheck(ours, m, lossTolerance(options),
                      gradTolerance(options))) {
        mismatched = true;
        llvm::outs() << formatv("  {0,-32} MISMATCH: {1}\n", m.name,
                                m.mismatch);
        continue;
      }
      // Equal-FLOPs peers do the function's FLOPs by definition.
      llvm::outs() << formatv(
          "  {0,-32} {1,9:F3} {2,9:F3} {3,9} {4,9} {5,7} {6,7} {7,7}\n",
          m.name, m.forwardMs, m.fwdbwdMs, tflops(info.forwardFlops, m.forwardMs),
          tflops(info.gradFlops, m.fwdbwdMs),
          percent(info.gradFlops, m.fwdbwdMs, peak),
          ratio(m.forwardMs, ours.forwardMs), ratio(m.fwdbwdMs, ours.fwdbwdMs));
      entries.push_back(llvm::json::Object{
          {"function", kernel.name},
          {"name", m.name},
          {"forward_ms", number(m.forwardMs)},
          {"grad_ms", number(m.fwdbwdMs)},
          {"forward_flops", number(info.forwardFlops)},
          {"grad_flops", number(info.gradFlops)},
          {"loss", number(m.loss)}});
    }
  }
  llvm::outs() << formatv(
      "\nx: the row's time over the first row's (switchyard, {0}); above 1: "
      "switchyard is faster.\nTF/s: useful TFLOP/s (2 per multiply-add of "
      "the op; the gradient adds one forward pass per\ndifferentiated matmul "
      "operand; attention over the causal pairs only). % peak: of the\nmatmul "
      "peak below, for the loss-and-gradient function. Every row but the "
      "equal-FLOPs ones\nis cross-checked against the first (loss {1:e1}, "
      "gradient norms {2:e1} relative).\ncompile time (definition to "
      "callable code, every function and _grad): {3}\n",
      fusionLabel(options, options.fusions.front()),
      lossTolerance(options), gradTolerance(options), compileTimes);
  if (!peakLine.empty())
    llvm::outs() << peakLine << "\n";
  if (!options.jsonOut.empty())
    writeJson(options.jsonOut,
              llvm::json::Object{{"file", file},
                                 {"backend", describeBackend(options)},
                                 {"peak_tflops", number(peak)},
                                 {"rows", std::move(entries)}});
  if (mismatched)
    fail("some implementations computed something else (MISMATCH above)");
  return 0;
}

//===- switchyard-bench.cpp - the SwitchHead layer against its peers, CPU -===//
//
// Times one SwitchHead attention layer (token embedding, lm.switchhead with
// its Transformer-XL memory, and a cross-entropy loss over its D output
// channels), forward and forward + backward, as Switchyard compiles it for
// the CPU (fused and unfused), against the plain C++ reference (forward; it
// has no backward pass) and against PyTorch eager on the CPU
// (bench/torch_switchhead.py, two formulations of the expert projections),
// all on the same parameters and inputs and in the same run, and prints each
// peer's time over Switchyard's. The losses and gradient norms of every
// implementation are cross-checked before any time is reported.
//
//===----------------------------------------------------------------------===//

#include "runtime/CpuProgram.h"
#include "test/reference/Reference.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <thread>

using namespace switchyard;
namespace rt = switchyard::runtime;
namespace ref = switchyard::reference;
namespace cl = llvm::cl;
using llvm::formatv;

namespace {

cl::OptionCategory category("Benchmark options");
cl::opt<std::string> configName(
    "config", cl::desc("Layer shape: the paper's 47m (default) or 262m "
                       "configuration, or tiny (the test model's width)"),
    cl::init("47m"), cl::cat(category));
cl::opt<int64_t> batch("batch", cl::desc("Sequences per call (2)"), cl::init(2),
                       cl::cat(category));
cl::opt<unsigned> reps("reps",
                       cl::desc("Timed runs per measurement (the median is "
                                "reported), after one warm-up run (5)"),
                       cl::init(5), cl::cat(category));
cl::opt<std::string> python(
    "python", cl::desc("Python with PyTorch for the peer baseline; empty: "
                       "skip PyTorch"),
    cl::init("/usr/bin/python3"), cl::cat(category));
cl::list<unsigned> torchThreads(
    "torch-threads", cl::CommaSeparated,
    cl::desc("PyTorch thread counts to measure (default: 1 and every core)"),
    cl::cat(category));
cl::opt<std::string> script(
    "script", cl::desc("The PyTorch baseline script"),
    cl::init(SWITCHYARD_BENCH_SCRIPT), cl::cat(category));
cl::opt<bool> skipReference("skip-reference",
                            cl::desc("Do not time the C++ reference"),
                            cl::init(false), cl::cat(category));
cl::opt<std::string> kernels(
    "kernels",
    cl::desc("Instead of the layer: time every function of this file and its "
             "loss-and-gradient function (lm-differentiate), on seeded "
             "random inputs (bench/Inputs/kernels-47m.mlir: the layer's ops "
             "one by one)"),
    cl::value_desc("file.mlir"), cl::cat(category));
cl::opt<std::string> jsonOut("json",
                             cl::desc("Also write the results here as JSON"),
                             cl::value_desc("file"), cl::cat(category));

/// One attention layer's shape (docs/SWITCHHEAD.md, "Configurations").
struct Config {
  std::string name;
  int64_t width, heads, experts, k, headDim, time;
};

const Config kConfigs[] = {
    {"tiny", 128, 2, 5, 3, 32, 128},
    {"47m", 412, 2, 5, 3, 76, 256},
    {"262m", 1024, 4, 4, 2, 112, 512},
};
constexpr int64_t kVocab = 256;

std::string modelSource(const Config &c) {
  std::string x = formatv("tensor<{0}x{1}x{2}xf32>", batch, c.time, c.width);
  return formatv(
      "lm.model @layer(%tokens: tensor<{0}x{1}xi32>, %mem: {2}) -> ({2}, {2}) "
      "{{\n"
      "  %x = lm.embed \"embed\" %tokens {{vocab = {3}} : "
      "tensor<{0}x{1}xi32> -> {2}\n"
      "  %y = lm.switchhead \"att\" %x memory(%mem : {2}) {{heads = {4}, "
      "experts = {5}, k = {6}, head_dim = {7}, pos = #lm.pos<xl>} : {2}\n"
      "  lm.return %y, %x : {2}, {2}\n"
      "}\n",
      batch, c.time, x, kVocab, c.heads, c.experts, c.k, c.headDim);
}

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

/// The median of `reps` timed runs of `run`, after one warm-up run.
template <typename Fn> double medianMs(Fn &&run) {
  run();
  std::vector<double> times;
  for (unsigned i = 0; i < std::max(1u, unsigned(reps)); ++i) {
    Clock::time_point start = Clock::now();
    run();
    times.push_back(millisecondsSince(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "switchyard-bench: error: " << message << "\n";
  std::exit(1);
}

template <typename T>
T check(llvm::Expected<T> value, const llvm::Twine &what) {
  if (!value)
    fail(what + ": " + llvm::toString(value.takeError()));
  return std::move(*value);
}

/// One row of the report.
struct Measurement {
  std::string name;
  double forwardMs = NAN, fwdbwdMs = NAN, loss = NAN;
  std::map<std::string, double> gradNorms;
};

double l2(const rt::HostTensor &t) {
  double sum = 0;
  for (float v : t.values<float>())
    sum += double(v) * v;
  return std::sqrt(sum);
}

/// The inputs every implementation gets.
struct Inputs {
  std::vector<rt::HostTensor> params; // in the program's declaration order
  rt::HostTensor tokens, targets, memory;
};

Inputs makeInputs(const rt::Program &program, const Config &c) {
  Inputs in;
  for (const rt::ParamSpec &spec : program.params().params) {
    std::vector<float> values(size_t(spec.numElements()));
    rt::initialize(spec, /*seed=*/1, values);
    in.params.push_back(rt::HostTensor::fromValues<float>(
        spec.name, rt::ElementType::f32, spec.shape, values));
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, kVocab - 1),
      target(0, int32_t(c.width - 1));
  std::vector<int32_t> tokens(size_t(batch * c.time)),
      targets(tokens.size());
  for (auto [t, y] : llvm::zip(tokens, targets)) {
    t = token(rng);
    y = target(rng);
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> memory(size_t(batch * c.time * c.width));
  for (float &m : memory)
    m = normal(rng);
  in.tokens = rt::HostTensor::fromValues<int32_t>(
      "tokens", rt::ElementType::i32, {batch, c.time}, tokens);
  in.targets = rt::HostTensor::fromValues<int32_t>(
      "targets", rt::ElementType::i32, {batch, c.time}, targets);
  in.memory = rt::HostTensor::fromValues<float>(
      "memory", rt::ElementType::f32, {batch, c.time, c.width}, memory);
  return in;
}

/// Compiles the layer with `fusion` and times its forward and `_grad`.
Measurement measureSwitchyard(const std::string &source, const Config &c,
                              const Inputs *shared, Inputs *made,
                              llvm::StringRef fuse, double &compileMs) {
  rt::CompileOptions options;
  options.gradients = true;
  if (fuse == "none")
    options.fusion = {/*router=*/false, /*expertProjection=*/false,
                      /*attention=*/false};
  Clock::time_point start = Clock::now();
  std::unique_ptr<rt::CpuProgram> program = check(
      rt::CpuProgram::compile(source, "bench-layer.mlir", options), "compile");
  compileMs = millisecondsSince(start);
  if (!shared) {
    *made = makeInputs(*program, c);
    shared = made;
  }
  std::vector<const rt::HostTensor *> forward = {&shared->tokens,
                                                 &shared->memory};
  for (const rt::HostTensor &p : shared->params)
    forward.push_back(&p);
  std::vector<const rt::HostTensor *> grad = forward;
  grad.push_back(&shared->targets);

  Measurement m;
  m.name = formatv("switchyard ({0})", fuse == "all" ? "fused" : "unfused");
  auto call = [&](llvm::StringRef name,
                  llvm::ArrayRef<const rt::HostTensor *> args) {
    return check(program->call(name, args), "call @" + name);
  };
  m.forwardMs = medianMs([&] { call("layer", forward); });
  std::vector<rt::HostTensor> results;
  m.fwdbwdMs = medianMs([&] { results = call("layer_grad", grad); });
  m.loss = results[0].values<float>()[0];
  for (auto [index, p] : llvm::enumerate(shared->params))
    m.gradNorms[p.name] = l2(results[1 + index]);
  return m;
}

ref::Tensor toReference(const rt::HostTensor &t) {
  auto values = t.values<float>();
  return ref::Tensor::fromData(t.shape,
                               {values.begin(), values.end()});
}

Measurement measureReference(const Config &c, const Inputs &in) {
  std::map<std::string, ref::Tensor> p;
  for (const rt::HostTensor &t : in.params)
    p[t.name] = toReference(t);
  ref::SwitchHeadParams sh;
  sh.norm = {p.at("att.norm.weight"), p.at("att.norm.bias")};
  sh.q = p.at("att.q");
  sh.k = p.at("att.k");
  sh.v = p.at("att.v");
  sh.o = p.at("att.o");
  sh.sel_v = p.at("att.sel_v");
  sh.sel_o = p.at("att.sel_o");
  sh.pos = p.at("att.pos");
  ref::IndexTensor tokens{{batch, c.time}, {}}, targets = tokens;
  for (int32_t t : in.tokens.values<int32_t>())
    tokens.data.push_back(t);
  for (int32_t t : in.targets.values<int32_t>())
    targets.data.push_back(t);
  ref::Tensor memory = toReference(in.memory);
  ref::Tensor y;
  Measurement m;
  m.name = "C++ reference";
  m.forwardMs = medianMs([&] {
    y = ref::switchHeadBlock(ref::embed(tokens, p.at("embed.weight")), sh,
                             c.heads, c.experts, c.k, c.headDim, ref::Pos::xl,
                             &memory);
  });
  m.loss = ref::crossEntropy(y, targets);
  return m;
}

/// Writes the inputs as .npy and config.json into `dir` for the script.
void exportInputs(llvm::StringRef dir, const Config &c, const Inputs &in) {
  llvm::json::Array names;
  for (const rt::HostTensor &p : in.params) {
    names.push_back(p.name);
    if (llvm::Error e = rt::writeNpy((dir + "/" + p.name + ".npy").str(), p))
      fail(llvm::toString(std::move(e)));
  }
  for (const rt::HostTensor *t : {&in.tokens, &in.targets, &in.memory})
    if (llvm::Error e =
            rt::writeNpy((dir + "/" + t->name + ".npy").str(), *t))
      fail(llvm::toString(std::move(e)));
  llvm::json::Object config{
      {"layer", "att"},        {"params", std::move(names)},
      {"batch", int64_t(batch)}, {"time", c.time},
      {"width", c.width},      {"heads", c.heads},
      {"experts", c.experts},  {"k", c.k},
      {"head_dim", c.headDim}, {"pos", "xl"},
      {"memory", true},        {"reps", int64_t(reps)},
      {"threads", 1}};
  std::error_code ec;
  llvm::raw_fd_ostream os((dir + "/config.json").str(), ec);
  if (ec)
    fail("cannot write config.json: " + ec.message());
  os << llvm::json::Value(std::move(config));
}

/// Runs bench/torch_switchhead.py with `threads` and parses its report.
std::vector<Measurement> measureTorch(llvm::StringRef dir, unsigned threads,
                                      std::string &version) {
  llvm::SmallString<256> out(dir);
  llvm::sys::path::append(out, formatv("torch-{0}.json", threads).str());
  std::string threadArg = std::to_string(threads);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, out.str(),
                                                std::nullopt};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(
      python, {python, script, dir, threadArg}, std::nullopt,
      redirects, 0, 0, &message);
  if (rc != 0)
    fail(formatv("{0} {1} failed (exit {2}) {3}; is python3-torch installed "
                 "(bench/cpu.sh installs it)? --python= skips PyTorch",
                 python, script, rc, message));
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(out, /*IsText=*/true);
  if (!buffer)
    fail("cannot read " + out + ": " + buffer.getError().message());
  llvm::json::Value report =
      check(llvm::json::parse((*buffer)->getBuffer()), "parse " + out);
  llvm::json::Object &root = *report.getAsObject();
  version = root.getString("torch").value_or("?").str();
  std::vector<Measurement> rows;
  for (llvm::StringRef form : {"dense", "loop"}) {
    const llvm::json::Object *r =
        root.getObject("results")->getObject(form);
    Measurement m;
    m.name = formatv("PyTorch eager, {0}, {1} thread{2}", form, threads,
                     threads == 1 ? "" : "s");
    m.forwardMs = *r->getNumber("forward_ms");
    m.fwdbwdMs = *r->getNumber("fwdbwd_ms");
    m.loss = *r->getNumber("loss");
    for (const auto &[name, norm] : *r->getObject("grad_norms"))
      m.gradNorms[name.str()] = *norm.getAsNumber();
    rows.push_back(std::move(m));
  }
  return rows;
}

/// Fails unless `m` computed the same loss as `base` to 1e-4 relative (f32
/// sums in another order) and, where it has them, the same gradient norms to
/// 1e-3: a near-tie in a router's top-k can fall the other way under another
/// summation order and move one token's gradient to another expert (seen at
/// the 262M shapes: |d att.o| 1.9e-4 apart). A wrong equation is far off
/// either bound.
void crossCheck(const Measurement &base, const Measurement &m) {
  auto close = [](double a, double b, double relative) {
    return std::abs(a - b) <=
           1e-5 + relative * std::max(std::abs(a), std::abs(b));
  };
  if (!close(base.loss, m.loss, 1e-4))
    fail(formatv("{0} computes loss {1:e}, {2} {3:e}: not the same layer",
                 m.name, m.loss, base.name, base.loss));
  for (const auto &[name, norm] : m.gradNorms)
    if (!close(base.gradNorms.at(name), norm, 1e-3))
      fail(formatv("{0}: |d{1}| = {2:e}, {3}: {4:e}; not the same gradients",
                   m.name, name, norm, base.name, base.gradNorms.at(name)));
}

std::string cpuModel() {
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

std::string ratio(double peer, double ours) {
  if (std::isnan(peer) || std::isnan(ours))
    return "-";
  return formatv("{0:F2}x", peer / ours);
}

/// Seeded random arguments for `function`: token ids and indices uniform in
/// [0, vocab), floats uniform in [-1, 1].
std::vector<rt::HostTensor> randomArguments(const rt::FunctionSpec &function) {
  std::mt19937 rng(11);
  std::vector<rt::HostTensor> args;
  for (const rt::TensorSpec &spec : function.arguments) {
    int64_t count = 1;
    for (int64_t size : spec.shape)
      count *= size < 0 ? 1 : size;
    std::vector<int64_t> shape = spec.shape;
    for (int64_t &size : shape)
      size = size < 0 ? 1 : size;
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

/// --kernels: every function of the file, and its _grad, fused and unfused.
int timeKernels() {
  llvm::outs() << formatv("{0,-28} {1,14} {2,14} {3,14} {4,14}\n", "function",
                          "fused ms", "fused _grad", "unfused ms",
                          "unfused _grad");
  std::map<std::string, std::array<double, 4>> times;
  std::vector<std::string> order;
  for (int variant = 0; variant < 2; ++variant) {
    rt::CompileOptions options;
    options.gradients = true;
    if (variant == 1)
      options.fusion = {false, false, false};
    std::unique_ptr<rt::CpuProgram> program =
        check(rt::CpuProgram::compileFile(kernels, options), "compile");
    for (const rt::FunctionSpec &f : program->functions()) {
      if (llvm::StringRef(f.name).ends_with("_grad"))
        continue;
      const rt::FunctionSpec *grad = program->lookup(f.name + "_grad");
      if (variant == 0)
        order.push_back(f.name);
      for (int g = 0; g < 2; ++g) {
        const rt::FunctionSpec *spec = g ? grad : &f;
        double &slot = times[f.name][variant * 2 + g];
        slot = NAN;
        if (!spec)
          continue;
        std::vector<rt::HostTensor> args = randomArguments(*spec);
        std::vector<const rt::HostTensor *> pointers;
        for (const rt::HostTensor &a : args)
          pointers.push_back(&a);
        slot = medianMs([&] {
          check(program->call(spec->name, pointers), "call @" + spec->name);
        });
      }
    }
  }
  for (const std::string &name : order) {
    auto &t = times[name];
    llvm::outs() << formatv("{0,-28} {1,14:F2} {2,14:F2} {3,14:F2} {4,14:F2}\n",
                            name, t[0], t[1], t[2], t[3]);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard-bench: one SwitchHead layer, forward and forward+backward, "
      "on the CPU\n\n"
      "Compiles the layer (embedding, lm.switchhead with Transformer-XL "
      "memory of T tokens,\ncross-entropy over its D output channels) with "
      "Switchyard's CPU pipeline, fused and\nunfused, and times it against "
      "the plain C++ reference (forward only) and PyTorch\neager "
      "(bench/torch_switchhead.py; dense-all-experts and per-expert-loop "
      "formulations)\non the same parameters and inputs, after checking that "
      "every one computes the same\nloss (1e-4) and gradient norms (1e-3). Ratios are the "
      "peer's median time over Switchyard's fused\ntime: above 1, Switchyard "
      "is faster. Switchyard's compiled code runs on one thread.\n");
  if (!kernels.empty())
    return timeKernels();
  const Config *config = llvm::find_if(
      kConfigs, [](const Config &c) { return c.name == configName; });
  if (config == std::end(kConfigs))
    fail("unknown --config '" + configName + "' (tiny, 47m or 262m)");
  const Config &c = *config;
  std::string source = modelSource(c);

  llvm::outs() << formatv(
      "SwitchHead layer, {0} configuration: D {1}, {2} heads x {3}, {4} "
      "experts, k {5}, T {6} + XL memory {6}; batch {7}\nCPU: {8} ({9} "
      "cores)\n\n",
      c.name, c.width, c.heads, c.headDim, c.experts, c.k, c.time, batch,
      cpuModel(), std::thread::hardware_concurrency());
  llvm::outs().flush();

  Inputs inputs;
  double fusedCompileMs = 0, unfusedCompileMs = 0;
  std::vector<Measurement> rows;
  rows.push_back(measureSwitchyard(source, c, nullptr, &inputs, "all",
                                   fusedCompileMs));
  rows.push_back(measureSwitchyard(source, c, &inputs, nullptr, "none",
                                   unfusedCompileMs));
  crossCheck(rows[0], rows[1]);
  if (!skipReference) {
    rows.push_back(measureReference(c, inputs));
    crossCheck(rows[0], rows.back());
  }
  std::string torchVersion;
  if (!python.empty()) {
    llvm::SmallString<128> dir;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("switchyard-bench", dir))
      fail("cannot create a temporary directory: " + ec.message());
    exportInputs(dir, c, inputs);
    std::vector<unsigned> threads(torchThreads.begin(), torchThreads.end());
    if (threads.empty()) {
      threads.push_back(1);
      if (std::thread::hardware_concurrency() > 1)
        threads.push_back(std::thread::hardware_concurrency());
    }
    for (unsigned n : threads)
      for (Measurement &m : measureTorch(dir, n, torchVersion)) {
        crossCheck(rows[0], m);
        rows.push_back(std::move(m));
      }
    llvm::sys::fs::remove_directories(dir);
  }

  const Measurement &ours = rows[0];
  llvm::outs() << formatv("{0,-36} {1,12} {2,12} {3,10} {4,10}\n", "",
                          "forward ms", "fwd+bwd ms", "fwd ratio",
                          "f+b ratio");
  for (const Measurement &m : rows)
    llvm::outs() << formatv(
        "{0,-36} {1,12:F1} {2,12:F1} {3,10} {4,10}\n", m.name, m.forwardMs,
        m.fwdbwdMs, ratio(m.forwardMs, ours.forwardMs),
        ratio(m.fwdbwdMs, ours.fwdbwdMs));
  llvm::outs() << formatv(
      "\nratio: the row's time over switchyard (fused); above 1: switchyard "
      "is faster.\nloss {0:F6} in every implementation (cross-checked to "
      "1e-4 relative, and every\ngradient norm to 1e-3 where the "
      "implementation has a backward pass).\ncompile time (definition to JIT-compiled code, "
      "forward and _grad): fused {1:F0} ms, unfused {2:F0} ms\n",
      ours.loss, fusedCompileMs, unfusedCompileMs);
  if (!torchVersion.empty())
    llvm::outs() << "PyTorch " << torchVersion << "\n";

  if (!jsonOut.empty()) {
    llvm::json::Array entries;
    for (const Measurement &m : rows)
      entries.push_back(llvm::json::Object{
          {"name", m.name},
          {"forward_ms", std::isnan(m.forwardMs)
                             ? llvm::json::Value(nullptr)
                             : llvm::json::Value(m.forwardMs)},
          {"fwdbwd_ms", std::isnan(m.fwdbwdMs)
                            ? llvm::json::Value(nullptr)
                            : llvm::json::Value(m.fwdbwdMs)},
          {"loss", m.loss}});
    llvm::json::Object root{{"config", c.name},
                            {"batch", int64_t(batch)},
                            {"cpu", cpuModel()},
                            {"torch", torchVersion},
                            {"compile_ms_fused", fusedCompileMs},
                            {"compile_ms_unfused", unfusedCompileMs},
                            {"rows", std::move(entries)}};
    std::error_code ec;
    llvm::raw_fd_ostream os(jsonOut, ec);
    if (ec)
      fail("cannot write " + jsonOut + ": " + ec.message());
    os << formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  }
  return 0;
}

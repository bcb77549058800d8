//===- Run.cpp - switchyard run -------------------------------------------===//
//
// `switchyard run MODEL.mlir`: compiles a model for the CPU, the GPU or the
// GPU emulation, binds its parameters (from parameter files, or initialised
// from a seed) and its other arguments (.npy files), runs a function and
// writes its results to .npy files, compares them with expected .npy files
// (numpy.allclose's rule), or prints a summary of each.
//
//===----------------------------------------------------------------------===//

#include "tools/switchyard/Commands.h"
#include "tools/switchyard/Common.h"

#include "runtime/ParamFiles.h"
#include "runtime/TensorFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <vector>

namespace switchyard::driver {
namespace {

std::string describe(rt::ElementType type, llvm::ArrayRef<int64_t> shape) {
  std::string text = std::string(rt::toString(type)) + " [";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") +
            (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return text + "]";
}

std::string describe(const rt::TensorSpec &spec) {
  return describe(spec.type, spec.shape);
}

/// Token ids from NumPy are int64 by default: narrow them to the i32 the
/// model takes (the runtime then checks them against the vocabulary).
llvm::Error narrowTokens(rt::HostTensor &tensor, const rt::TensorSpec &spec) {
  if (!spec.vocab || spec.type != rt::ElementType::i32 ||
      tensor.type != rt::ElementType::i64)
    return llvm::Error::success();
  std::vector<int32_t> narrow;
  std::span<const int64_t> ids = tensor.values<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= *spec.vocab)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}: token id {1} at position {2} is outside the "
                        "vocabulary [0, {3})",
                        tensor.name, ids[i], i, *spec.vocab));
    narrow.push_back(static_cast<int32_t>(ids[i]));
  }
  std::string name = tensor.name;
  tensor = rt::HostTensor::fromValues<int32_t>(name, rt::ElementType::i32,
                                               tensor.shape, narrow);
  return llvm::Error::success();
}

/// The elements of a float tensor as doubles (f32 or f64), or nothing.
std::optional<std::vector<double>> floatValues(const rt::HostTensor &tensor) {
  if (tensor.type == rt::ElementType::f32) {
    std::span<const float> values = tensor.values<float>();
    return std::vector<double>(values.begin(), values.end());
  }
  if (tensor.type == rt::ElementType::f64) {
    std::span<const double> values = tensor.values<double>();
    return std::vector<double>(values.begin(), values.end());
  }
  return std::nullopt;
}

/// Compares `result` with the expected values in `path`, element by element:
/// |result − expected| ≤ atol + rtol·|expected| (numpy.allclose). Prints the
/// largest errors on stdout; returns false with the worst element named
/// when an element is outside the tolerance.
llvm::Expected<bool> compareWith(const rt::HostTensor &result, size_t index,
                                 const std::string &path, double rtol,
                                 double atol) {
  llvm::Expected<rt::HostTensor> expected = rt::readNpy(path);
  if (!expected)
    return expected.takeError();
  std::optional<std::vector<double>> want = floatValues(*expected);
  std::optional<std::vector<double>> got = floatValues(result);
  if (!want || !got || expected->shape != result.shape)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0}: holds {1}, result #{2} is {3}; --compare needs "
                      "float tensors of the same shape",
                      path, describe(expected->type, expected->shape), index,
                      describe(result.type, result.shape))
            .str());
  double maxError = 0, maxRelative = 0, errorSquares = 0, expectedSquares = 0;
  size_t worst = 0, outside = 0;
  double worstExcess = -INFINITY;
  for (size_t i = 0; i < want->size(); ++i) {
    double e = (*want)[i], g = (*got)[i], error = std::abs(g - e);
    // Equal values (infinities of one sign included) are close; a NaN on
    // either side is not (as numpy.allclose has it).
    if (g == e)
      error = 0;
    else if (std::isnan(error))
      error = INFINITY;
    maxError = std::max(maxError, error);
    if (e != 0)
      maxRelative = std::max(maxRelative, error / std::abs(e));
    errorSquares += error * error;
    expectedSquares += e * e;
    double bound = atol + rtol * std::abs(e);
    double excess = g == e                          ? -bound
                    : std::isnan(g) || std::isnan(e) ? INFINITY
                    : std::isinf(bound)              ? INFINITY
                                                     : error - bound;
    if (excess > 0)
      ++outside;
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
  }
  std::string position;
  for (size_t rest = worst, d = want->empty() ? 0 : result.shape.size();
       d-- > 0;) {
    size_t extent = size_t(result.shape[d]);
    position = std::to_string(rest % extent) + (position.empty() ? "" : ", ") +
               position;
    rest /= extent;
  }
  bool ok = outside == 0;
  llvm::outs() << llvm::formatv(
      "result #{0} against {1}: max |error| {2:e2}, max |error|/|expected| "
      "{3:e2}, ||error||/||expected|| {4:e2}; {5} of {6} elements outside "
      "atol {7:e1} + rtol {8:e1}·|expected|{9}\n",
      index, path, maxError, maxRelative,
      expectedSquares > 0 ? std::sqrt(errorSquares / expectedSquares) : 0.0,
      outside, want->size(), atol, rtol,
      want->empty()
          ? ""
          : llvm::formatv(" (closest to failing: [{0}], expected {1:e6}, "
                          "got {2:e6})",
                          position, (*want)[worst], (*got)[worst])
                .str());
  return ok;
}

} // namespace

int runRun(int argc, char **argv) {
  static ModelOptions model;
  static cl::list<std::string> inputs(
      "input",
      cl::desc("A .npy file for the next non-parameter argument (token ids "
               "first, then XL memories); repeat in argument order"),
      cl::value_desc("file.npy"), cl::cat(model.category));
  static cl::list<std::string> outputs(
      "output",
      cl::desc("Write the next result (logits first, then new XL memories) "
               "to this .npy file; repeat in result order"),
      cl::value_desc("file.npy"), cl::cat(model.category));
  static cl::list<std::string> params(
      "params",
      cl::desc("Read the parameters from this safetensors file, by "
               "Switchyard's or the official names (repeatable: each "
               "parameter from exactly one file)"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static ParamFileFlags paramFlags(model.category);
  static cl::opt<uint64_t> seed(
      "seed",
      cl::desc("Without --params (or with --init-missing): initialise the "
               "parameters with their declared initialisers from this seed "
               "(default 0)"),
      cl::init(0), cl::cat(model.category));
  static cl::list<std::string> compare(
      "compare",
      cl::desc("Compare the next result with this .npy file (repeatable, in "
               "result order): exit 1 when an element differs by more than "
               "--atol + --rtol·|expected|"),
      cl::value_desc("file.npy"), cl::cat(model.category));
  static cl::opt<double> rtol("rtol",
                              cl::desc("Relative tolerance of --compare "
                                       "(1e-5)"),
                              cl::init(1e-5), cl::cat(model.category));
  static cl::opt<double> atol("atol",
                              cl::desc("Absolute tolerance of --compare "
                                       "(1e-6)"),
                              cl::init(1e-6), cl::cat(model.category));
  static cl::opt<std::string> saveParams(
      "save-params",
      cl::desc("Write the parameters used to this safetensors file"),
      cl::value_desc("file.safetensors"), cl::cat(model.category));
  static cl::opt<std::string> function(
      "function",
      cl::desc("The function to run when the module has several (default: "
               "the only one)"),
      cl::cat(model.category));
  static DeviceOption device(model.category);
  registerCommandOptions(model.category, {&device.gpuCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "switchyard run: compile a model and run its forward pass\n\n"
      "Compiles MODEL.mlir with the CPU pipeline (--switchyard-cpu-pipeline\n"
      "in switchyard-opt; with --device gpu, the GPU pipeline), binds the\n"
      "parameters by name (from --params, or\n"
      "initialised from --seed), binds each --input .npy to the next\n"
      "non-parameter argument (int64 token ids are narrowed to the model's\n"
      "i32), runs, and writes each result to the next --output .npy; without\n"
      "--output it prints a summary of each result. Use it to cross-check\n"
      "Switchyard against another implementation with the same weights:\n"
      "--params reads the official SwitchHead and sigma-MoE names too\n"
      "(docs/Parameters.md), and --compare checks each result against that\n"
      "implementation's output.\n");

  for (auto [name, value] : {std::pair{"rtol", double(rtol)},
                             std::pair{"atol", double(atol)}})
    if (!std::isfinite(value) || value < 0)
      return fail(llvm::formatv("--{0}: expected a finite tolerance, 0 or "
                                "more, found {1}",
                                name, llvm::format("%g", value))
                      .str());
  std::vector<std::string> written(outputs.begin(), outputs.end());
  if (!saveParams.empty())
    written.push_back(saveParams);
  for (const std::string &path : written)
    if (llvm::Error error = rt::checkWritable(path))
      return fail(std::move(error));

  llvm::Expected<std::unique_ptr<rt::Program>> compiled =
      compileFor(device, model);
  if (!compiled)
    return fail(compiled.takeError());
  rt::Program &program = **compiled;

  const rt::FunctionSpec *callee = nullptr;
  if (!function.empty()) {
    callee = program.lookup(function);
    if (!callee)
      return fail("no function @" + function + " in " + model.input);
  } else if (program.functions().size() == 1) {
    callee = &program.functions().front();
  } else {
    std::string names;
    for (const rt::FunctionSpec &f : program.functions())
      names += " @" + f.name;
    return fail(model.input + " has " +
                std::to_string(program.functions().size()) +
                " functions; choose one with --function:" + names);
  }

  // Parameters: from the files, or every one initialised from the seed.
  llvm::Expected<rt::ParamFileOptions> fileOptions = paramFlags.options(seed);
  if (!fileOptions)
    return fail(fileOptions.takeError());
  if (params.empty()) {
    fileOptions->initMissing = true;
    fileOptions->note = nullptr;
  }
  llvm::Expected<std::vector<rt::HostTensor>> ordered = rt::readParamFiles(
      program.params(), std::vector<std::string>(params.begin(), params.end()),
      *fileOptions);
  if (!ordered)
    return fail(ordered.takeError());
  std::map<std::string, const rt::HostTensor *> bound;
  for (const rt::HostTensor &tensor : *ordered)
    bound[tensor.name] = &tensor;
  if (!saveParams.empty())
    if (llvm::Error error = rt::writeSafetensors(
            saveParams, *ordered, {{"format", rt::kParamsFormat},
                                   {"model", callee->name}}))
      return fail(std::move(error));

  // Inputs, in argument order.
  std::vector<const rt::TensorSpec *> dataArguments;
  for (const rt::TensorSpec &spec : callee->arguments)
    if (spec.param.empty())
      dataArguments.push_back(&spec);
  if (inputs.size() != dataArguments.size()) {
    std::string expected;
    for (const rt::TensorSpec *spec : dataArguments)
      expected += "\n  " + describe(*spec) +
                  (spec->vocab ? " token ids in [0, " +
                                     std::to_string(*spec->vocab) + ")"
                               : "");
    return fail(llvm::formatv("@{0} takes {1} inputs, {2} given with "
                              "--input; expected, in order:{3}",
                              callee->name, dataArguments.size(),
                              inputs.size(), expected)
                    .str());
  }
  if (compare.size() > callee->results.size())
    return fail(llvm::formatv("@{0} has {1} results, {2} --compare given",
                              callee->name, callee->results.size(),
                              compare.size())
                    .str());
  if (outputs.size() > callee->results.size())
    return fail(llvm::formatv("@{0} has {1} results, {2} --output given",
                              callee->name, callee->results.size(),
                              outputs.size())
                    .str());
  std::vector<rt::HostTensor> data;
  for (auto [path, spec] : llvm::zip(inputs, dataArguments)) {
    llvm::Expected<rt::HostTensor> tensor = rt::readNpy(path);
    if (!tensor)
      return fail(tensor.takeError());
    tensor->name = path;
    if (llvm::Error error = narrowTokens(*tensor, *spec))
      return fail(std::move(error));
    data.push_back(std::move(*tensor));
  }

  std::vector<const rt::HostTensor *> arguments;
  size_t next = 0;
  for (const rt::TensorSpec &spec : callee->arguments)
    arguments.push_back(spec.param.empty() ? &data[next++]
                                           : bound.at(spec.param));
  llvm::Expected<std::vector<rt::HostTensor>> results =
      program.call(callee->name, arguments);
  if (!results)
    return fail(results.takeError());

  bool allClose = true;
  for (auto [index, result] : llvm::enumerate(*results)) {
    if (index < outputs.size())
      if (llvm::Error error = rt::writeNpy(outputs[index], result))
        return fail(std::move(error));
    if (index < compare.size()) {
      llvm::Expected<bool> close =
          compareWith(result, index, compare[index], rtol, atol);
      if (!close)
        return fail(close.takeError());
      allClose &= *close;
    }
    if (index < outputs.size() || index < compare.size())
      continue;
    std::string summary = llvm::formatv("result #{0}: {1}", index,
                                        describe(result.type, result.shape))
                              .str();
    if (result.type == rt::ElementType::f32 && result.numElements() > 0) {
      std::span<const float> values = result.values<float>();
      double sum = 0, low = INFINITY, high = -INFINITY;
      for (float v : values) {
        sum += v;
        low = std::min<double>(low, v);
        high = std::max<double>(high, v);
      }
      summary += llvm::formatv(", mean {0:e4}, min {1:e4}, max {2:e4}",
                               values.empty() ? 0.0 : sum / values.size(), low,
                               high)
                     .str();
    }
    llvm::outs() << summary << "\n";
  }
  if (!allClose)
    return fail("the results differ from the --compare files beyond the "
                "tolerance");
  return 0;
}

} // namespace switchyard::driver

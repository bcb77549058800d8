//===- switchyard-fuzz.cpp - libFuzzer target over the compiler -----------===//
//
// Feeds arbitrary text through what a user's model file goes through: the
// parser and verifier, then on copies of the module the front end and one of
// the CPU pipeline to the LLVM dialect (with and without the training step)
// and the GPU pipeline to PTX (f32 SIMT with the training step, and bf16
// tensor cores). (The bf16 training step of a four-layer model takes
// longer than the per-input limit under the sanitizers.) A diagnostic is the
// expected answer to bad input; a crash, a sanitizer report or a hang is a
// bug, and each one found becomes a regression test.
//
// Built by scripts/fuzz.sh (CMake option SWITCHYARD_FUZZ: the project's
// code instrumented for libFuzzer, AddressSanitizer and
// UndefinedBehaviorSanitizer), which also seeds the corpus from examples/
// and test/ and passes the dialects' dictionary (switchyard.dict).
//
//===----------------------------------------------------------------------===//

#include "lib/InitSwitchyard.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>

using namespace mlir;

namespace {

MLIRContext *context = nullptr;

/// The pipelines an input that verifies goes through: the front end, then
/// one of the others, chosen by a hash of the input (so that every
/// pipeline meets every kind of input over a run, at a fifth of the time
/// per input). PTX comes from LLVM's NVPTX back end in process; ptxas is
/// not run.
const char *const kFrontend = "switchyard-frontend-pipeline";
const char *const kPipelines[] = {
    "switchyard-cpu-pipeline",
    "switchyard-cpu-pipeline{train-step=1 fuse=all}",
    "switchyard-gpu-pipeline{chip=sm_90a format=isa train-step=1}",
    "switchyard-gpu-pipeline{chip=sm_90a format=isa element-type=bf16}",
};

/// Verifies the IR after every pass that succeeded and aborts, naming the
/// pass, when it is invalid.
struct VerifyAfterEachPass : public PassInstrumentation {
  void runAfterPass(Pass *pass, Operation *op) override {
    if (succeeded(verify(op)))
      return;
    llvm::errs() << "switchyard-fuzz: invalid IR after " << pass->getName()
                 << "\n";
    std::abort();
  }
};

/// Inputs longer than this are skipped: the models and tests that seed the
/// corpus are shorter, and long inputs only slow the search.
constexpr size_t kMaxInput = 32 * 1024;

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  switchyard::registerPassesAndPipelines();
  DialectRegistry registry;
  switchyard::registerDialects(registry);
  // One thread: each input's work is small, and threads would hide which
  // input a report belongs to.
  context = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
  context->printOpOnDiagnostic(false);
  context->printStackTraceOnDiagnostic(false);
  // Each pipeline must parse: a typo here is the harness's bug.
  for (const char *spec : llvm::concat<const char *const>(
           llvm::ArrayRef(kFrontend), llvm::ArrayRef(kPipelines))) {
    PassManager pm(context);
    if (failed(parsePassPipeline(spec, pm, llvm::errs()))) {
      llvm::errs() << "switchyard-fuzz: cannot build pipeline '" << spec
                   << "'\n";
      std::abort();
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInput)
    return 0;
  // A copy: MLIR's lexer reads up to a terminating NUL.
  std::string text(reinterpret_cast<const char *>(data), size);
  // Diagnostics are the expected outcome: drop them.
  ScopedDiagnosticHandler quiet(context,
                                [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, ParserConfig(context));
  if (!module || failed(verify(*module)))
    return 0;
  const char *chosen =
      kPipelines[llvm::xxh3_64bits(llvm::StringRef(text)) % std::size(kPipelines)];
  for (const char *spec : {kFrontend, chosen}) {
    OwningOpRef<ModuleOp> copy = module->clone();
    PassManager pm(context);
    if (failed(parsePassPipeline(spec, pm)))
      std::abort();
    // A pass that succeeds must leave valid IR: invalid IR after a pass is
    // the compiler's bug, not a rejected input, and aborts (reported).
    pm.enableVerifier(false);
    pm.addInstrumentation(std::make_unique<VerifyAfterEachPass>());
    (void)pm.run(*copy);
  }
  return 0;
}

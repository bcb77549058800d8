//===- OptionsBinder.h - option structs as pass options and flags -*- C++ -*-===//
//
// Binders for the option structs of TargetOptions.h, whose bindOptions()
// declares each option once (name, field, description; the field's initial
// value is the default):
//
//   struct GpuPipelineOptions : PassPipelineOptions<GpuPipelineOptions> {
//     PassOptionsBinding<GpuTargetOptions> target{*this};
//   };
//   ... options.target.value()   // a GpuTargetOptions
//
//   CommandLineBinding<GpuTargetOptions> gpu("gpu-", category);
//   ... gpu.value()              // after cl::ParseCommandLineOptions
//
// in the manner of IREE's OptionsBinder: the pipelines, the drivers and the
// runtime read the same struct, and nobody copies options field by field.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_PIPELINES_OPTIONSBINDER_H
#define SWITCHYARD_LIB_PIPELINES_OPTIONSBINDER_H

#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace mlir::switchyard {

/// The options that `Options::bindOptions` declares, as options of a pass
/// pipeline (`parent`), after the ones `parent` declared before, with the
/// struct's defaults. value() reads their parsed values back into the
/// struct.
template <typename Options>
class PassOptionsBinding {
public:
  explicit PassOptionsBinding(::mlir::detail::PassOptions &parent) {
    Creator creator{parent, options};
    Options defaults;
    defaults.bindOptions(creator);
  }
  PassOptionsBinding(const PassOptionsBinding &) = delete;
  PassOptionsBinding &operator=(const PassOptionsBinding &) = delete;

  /// The options as parsed (or their defaults).
  Options value() const {
    Options result;
    Reader reader{options};
    result.bindOptions(reader);
    return result;
  }

private:
  // Each a PassOptions::Option<T>, held by its llvm::cl::Option base.
  using OptionList = std::vector<std::unique_ptr<llvm::cl::Option>>;

  struct Creator {
    ::mlir::detail::PassOptions &parent;
    OptionList &options;
    template <typename T>
    void bind(llvm::StringRef name, T &field, llvm::StringRef description) {
      options.push_back(std::make_unique<::mlir::detail::PassOptions::Option<T>>(
          parent, name, llvm::cl::desc(description), llvm::cl::init(field)));
    }
  };

  /// Reads the options in the order Creator made them.
  struct Reader {
    const OptionList &options;
    size_t next = 0;
    template <typename T>
    void bind(llvm::StringRef, T &field, llvm::StringRef) {
      field = static_cast<const ::mlir::detail::PassOptions::Option<T> &>(
                  *options[next++])
                  .getValue();
    }
  };

  OptionList options;
};

/// The options that `Options::bindOptions` declares, as command-line flags
/// `--<prefix><name>` in `category`, with the struct's defaults; value()
/// holds what was parsed. Like an llvm::cl::opt, a binding registers its
/// flags for the life of the process: make it a static (or a member of
/// one), as the tools do.
template <typename Options>
class CommandLineBinding {
public:
  CommandLineBinding(llvm::StringRef prefix, llvm::cl::OptionCategory &category)
      : prefix(prefix.str()), category(category) {
    Creator creator{*this};
    storage.bindOptions(creator);
  }
  CommandLineBinding(const CommandLineBinding &) = delete;
  CommandLineBinding &operator=(const CommandLineBinding &) = delete;

  /// The options as parsed (or their defaults).
  const Options &value() const { return storage; }

  /// The flags given on the command line, spelled `--<prefix><name>`, in
  /// the order the struct declares them.
  llvm::SmallVector<std::string> given() const {
    llvm::SmallVector<std::string> result;
    for (const std::unique_ptr<llvm::cl::Option> &flag : flags)
      if (flag->getNumOccurrences())
        result.push_back(("--" + flag->ArgStr).str());
    return result;
  }

private:
  struct Creator {
    CommandLineBinding &binding;
    template <typename T>
    void bind(llvm::StringRef name, T &field, llvm::StringRef description) {
      // cl::Option keeps its name as a StringRef: the binding owns it.
      llvm::StringRef flagName =
          binding.names.emplace_back(binding.prefix + name.str());
      binding.flags.push_back(std::make_unique<llvm::cl::opt<T, true>>(
          flagName, llvm::cl::desc(description), llvm::cl::location(field),
          llvm::cl::cat(binding.category)));
    }
  };

  std::string prefix;
  llvm::cl::OptionCategory &category;
  Options storage;
  std::deque<std::string> names;
  std::vector<std::unique_ptr<llvm::cl::Option>> flags;
};

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_PIPELINES_OPTIONSBINDER_H

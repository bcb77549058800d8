//===- TargetOptions.cpp - how GPU code is generated ----------------------===//
//
// The checks and derived settings of the GPU target's and the GPU
// emulation's options (TargetOptions.h).
//
//===----------------------------------------------------------------------===//

#include "lib/Pipelines/TargetOptions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>

using namespace mlir::switchyard;

/// An error that names the option `prefix` + `name`.
static llvm::Error optionError(llvm::StringRef prefix, llvm::StringRef name,
                               const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 (prefix + name + ": " + message).str());
}

llvm::Error mlir::switchyard::verifyKernelFormation(
    int64_t blockSize, llvm::StringRef elementType, llvm::StringRef prefix) {
  if (blockSize < 1 || blockSize > 1024)
    return optionError(prefix, "block-size",
                       llvm::formatv("expected 1 to 1024, found {0}",
                                     blockSize));
  if (!llvm::is_contained({"f32", "bf16", "f16"}, elementType))
    return optionError(prefix, "element-type",
                       "expected f32, bf16 or f16, found '" + elementType +
                           "'");
  return llvm::Error::success();
}

/// The lowest PTX ISA version that `chip` needs (PTX ISA manual, "Release
/// Notes"), and 8.1 (CUDA 12.1) at least: from 8.1 on, a kernel for sm_70
/// and newer takes up to 32764 bytes of parameters rather than 4096, which
/// the multi-tensor kernels of switchyard-gpu-merge-launches use. The
/// lowest version keeps the PTX loadable by the oldest driver that can;
/// ptxas of CUDA 13 reads all of them.
std::optional<llvm::StringRef>
mlir::switchyard::defaultPtxFeature(llvm::StringRef chip) {
  return llvm::StringSwitch<std::optional<llvm::StringRef>>(chip)
      .Cases({"sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"},
             "+ptx81")
      .Cases({"sm_100", "sm_100a"}, "+ptx86")
      .Cases({"sm_120", "sm_120a"}, "+ptx87")
      .Cases({"sm_103", "sm_103a", "sm_121", "sm_121a"}, "+ptx88")
      .Default(std::nullopt);
}

int64_t mlir::switchyard::maxKernelParameterBytes(llvm::StringRef features) {
  // The last +ptxNN among the features (NVPTX reads them in order).
  int64_t version = 0;
  llvm::SmallVector<llvm::StringRef> parts;
  features.split(parts, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts) {
    part = part.trim();
    int64_t v = 0;
    if (part.consume_front("+ptx") && !part.getAsInteger(10, v))
      version = v;
  }
  return version >= 81 ? 32764 : 4096;
}

std::string GpuTargetOptions::featuresOrDefault() const {
  if (!features.empty())
    return features;
  return defaultPtxFeature(chipOrDefault()).value_or("").str();
}

bool GpuTargetOptions::usesTensorCores() const {
  return elementType != "f32" && chipOrDefault() != "sm_75";
}

bool GpuTargetOptions::usesWgmma() const {
  return wgmma && usesTensorCores() && chipOrDefault() == "sm_90a";
}

std::string GpuTargetOptions::toolkitDir() const {
  if (!toolkit.empty())
    return toolkit;
  // The machine that runs the tools may keep the toolkit elsewhere than the
  // one that built them (the device bundle, bench/gpu-check.sh --bundle).
  if (const char *dir = std::getenv("SWITCHYARD_CUDA_TOOLKIT"))
    if (*dir)
      return dir;
  return SWITCHYARD_CUDA_TOOLKIT_DIR;
}

llvm::Error GpuTargetOptions::verify(llvm::StringRef prefix) const {
  if (llvm::Error error =
          verifyKernelFormation(blockSize, elementType, prefix))
    return error;
  if (!defaultPtxFeature(chipOrDefault()))
    return optionError(prefix, "chip",
                       "expected one of sm_75, sm_80, sm_86, sm_87, sm_89, "
                       "sm_90, sm_90a, sm_100, sm_100a, sm_103, sm_103a, "
                       "sm_120, sm_120a, sm_121, sm_121a, found '" +
                           chip + "'");
  if (!llvm::is_contained({"isa", "bin", "fatbin"}, llvm::StringRef(format)))
    return optionError(prefix, "format",
                       "expected bin, fatbin or isa, found '" + format + "'");
  if (optLevel > 3)
    return optionError(prefix, "opt-level",
                       llvm::formatv("expected 0 to 3, found {0}", optLevel));
  // Checked here because gpu-module-to-binary only reports a missing
  // libdevice as an error diagnostic and goes on without it.
  if (!llvm::sys::fs::is_directory(toolkitDir()))
    return optionError(prefix, "toolkit",
                       "'" + toolkitDir() +
                           "' is not a directory; expected the CUDA toolkit "
                           "root (bin/ptxas, nvvm/libdevice)");
  return llvm::Error::success();
}

llvm::Error GpuEmulationOptions::verify(llvm::StringRef prefix) const {
  return verifyKernelFormation(blockSize, elementType, prefix);
}

GpuEmulationOptions GpuTargetOptions::emulation() const {
  GpuEmulationOptions result;
  result.blockSize = blockSize;
  result.elementType = elementType;
  result.epilogues = epilogues;
  result.tensorCores = chipOrDefault() != "sm_75";
  result.wgmma = usesWgmma();
  return result;
}

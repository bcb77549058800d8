//===- FusionOptions.h - which moe fusions to apply -------------*- C++ -*-===//
//
// A plain struct, shared by the pipelines and the runtime (whose headers
// carry no MLIR types).
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_PIPELINES_FUSIONOPTIONS_H
#define SWITCHYARD_DIALECT_PIPELINES_FUSIONOPTIONS_H

namespace mlir::switchyard {

/// How moe ops become kernels: which fusions run before the lowering to
/// linalg. Each fusion can be switched off; the unfused route computes the
/// same results (tested), so that what a fusion buys can be measured.
struct FusionOptions {
  /// moe-fuse-router: router matmul, sigmoid and top-k in one kernel.
  bool router = true;
  /// moe-fuse-expert-projection: gather, matmul, gate scaling and the
  /// reduction over routes in one kernel, forward and gradients.
  bool expertProjection = true;
  /// moe-fuse-attention: flash-style attention with online softmax, forward
  /// and backward, without a T×T matrix in memory.
  bool attention = true;
};

} // namespace mlir::switchyard

#endif // SWITCHYARD_DIALECT_PIPELINES_FUSIONOPTIONS_H

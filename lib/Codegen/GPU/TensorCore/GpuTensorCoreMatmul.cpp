//===- GpuTensorCoreMatmul.cpp - matmul-like linalg ops on tensor cores ---===//
//
// Implements `switchyard-gpu-tensor-core-matmul`: with a 16-bit element type
// the multiplicands of every matmul-like linalg op are rounded to it, and
// with `tensor-cores` (sm_80+) each op that a tensor-core kernel takes
// becomes explicit `gpu.launch`es. This file is the pass: it matches the
// ops, chooses each one's route and dispatches it to the kernel builders,
// which are split by instruction family (TensorCoreKernels.h):
//   - with `wgmma` (sm_90a), a contraction of the mma.sync shape without a
//     batch dimension whose N and K are static: the wgmma + TMA kernel
//     (Wgmma.cpp), which like the mma.sync one folds a zero fill of C and
//     computes a marked epilogue where it stores C;
//   - another contraction with one M, one N and one K dimension (and at
//     most one batch dimension): the mma.sync kernel (MmaSync.cpp), which
//     starts from zero accumulators in place of a zero fill of C right
//     before it, and computes the elementwise consumer marked right after
//     it (switchyard-mark-epilogues) where it stores C;
//   - any other contraction, and every one without `tensor-cores`: the SIMT
//     fallback, its factors rounded as the CPU reference rounds them;
//   - moe.flash_attention_kernel and moe.flash_attention_grad_kernel on
//     buffers: the mma.sync flash attention kernels (AttentionForward.cpp,
//     AttentionBackward.cpp), their only lowering;
//   - moe.grouped_matmul on buffers with a tile_size that is a multiple of
//     kBlockM, and moe.grouped_weight_grad on buffers: the mma.sync kernel
//     (GroupedKernels.cpp); the others stay for
//     switchyard-lower-grouped-kernels.
// The kernels' PTX is assembled by ptxas for every chip, and the
// integration tests in test/Integration/CUDA check their results against
// the CPU's.
//
//===----------------------------------------------------------------------===//

#include "TensorCoreKernels.h"

#include "dialect/Moe/IR/MoeOps.h"
#include "lib/Codegen/Common/Contractions.h"
#include "lib/Codegen/Common/Epilogues.h"
#include "lib/Codegen/GPU/Passes.h"
#include "lib/Support/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "switchyard-gpu-tensor-core-matmul"

namespace mlir::switchyard {
#define GEN_PASS_DEF_SWITCHYARDGPUTENSORCOREMATMULPASS
#include "lib/Codegen/GPU/Passes.h.inc"
} // namespace mlir::switchyard

using namespace mlir;
using mlir::switchyard::Contraction;

using namespace mlir::switchyard::tensor_cores;

namespace {
struct SwitchyardGpuTensorCoreMatmulPass
    : public switchyard::impl::SwitchyardGpuTensorCoreMatmulPassBase<
          SwitchyardGpuTensorCoreMatmulPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    FailureOr<FloatType> parsed =
        switchyard::parseRoundingType(ctx, elementType);
    if (failed(parsed)) {
      func.emitError() << "switchyard-gpu-tensor-core-matmul: unsupported "
                          "element-type '"
                       << elementType << "'; expected f32, bf16 or f16";
      return signalPassFailure();
    }
    FloatType type = *parsed;
    if (!type)
      return;
    if (splitKBlocks < 0 || splitKMin < 1) {
      func.emitError() << "switchyard-gpu-tensor-core-matmul: split-k-blocks "
                          "must be >= 0 and split-k-min >= 1";
      return signalPassFailure();
    }
    SplitKPolicy policy{splitKBlocks, splitKMin};

    SmallVector<Contraction> contractions;
    func.walk([&](linalg::LinalgOp op) {
      if (op->getParentOfType<gpu::LaunchOp>())
        return;
      if (FailureOr<Contraction> c = switchyard::matchContraction(op);
          succeeded(c))
        contractions.push_back(*c);
    });

    LLVM_DEBUG(llvm::dbgs()
               << "[" DEBUG_TYPE "] " << func.getSymName() << ": "
               << contractions.size() << " contraction(s), element type "
               << type << "\n");

    IRRewriter rewriter(ctx);
    for (Contraction &c : contractions) {
      bool warpgroups = tensorCores && wgmma && fitsWgmma(c);
      if (warpgroups || (tensorCores && fitsTensorCores(c))) {
        LLVM_DEBUG(llvm::dbgs()
                   << "[" DEBUG_TYPE "] " << (warpgroups ? "wgmma" : "mma.sync")
                   << ": " << c.op->getName() << " at " << c.op.getLoc()
                   << "\n");
        // A zero fill of C right before: the kernel starts from zero
        // instead of reading C, and the fill's kernel goes.
        linalg::FillOp zeroFill = switchyard::precedingZeroFill(c.op);
        // The elementwise consumer marked as its epilogue: computed where
        // the kernel stores each element of C.
        linalg::GenericOp epilogue = switchyard::markedEpilogue(c.op);
        if (warpgroups) {
          buildWgmmaKernel(rewriter, c, type, static_cast<bool>(zeroFill),
                           epilogue);
        } else {
          MmaProblem problem = contractionProblem(rewriter, c, policy);
          problem.outZero = static_cast<bool>(zeroFill);
          if (epilogue) {
            Location loc = epilogue.getLoc();
            problem.epilogue = [epilogue, loc, out = problem.out,
                                outIndices = problem.outIndices](
                                   OpBuilder &b, Value batch, Value m, Value n,
                                   Value value) {
              switchyard::buildEpilogue(b, loc, epilogue, out,
                                        outIndices(b, batch, m, n), value);
            };
          }
          buildMmaKernel(rewriter, c.op, type, problem);
        }
        rewriter.eraseOp(c.op);
        if (zeroFill)
          rewriter.eraseOp(zeroFill);
        if (epilogue)
          rewriter.eraseOp(epilogue);
      } else {
        LLVM_DEBUG(llvm::dbgs()
                   << "[" DEBUG_TYPE "] SIMT, rounded factors: "
                   << c.op->getName() << " at " << c.op.getLoc() << "\n");
        // The SIMT fallback: the code switchyard-round-contraction-operands
        // runs, so the CPU reference rounds exactly these factors.
        switchyard::roundContractionFactors(rewriter, c, type);
      }
    }

    // moe.flash_attention_kernel and moe.flash_attention_grad_kernel
    // (buffers) have no other lowering.
    SmallVector<Operation *> attention;
    func.walk([&](Operation *op) {
      if (isa<moe::FlashAttentionKernelOp, moe::FlashAttentionGradKernelOp>(
              op) &&
          op->getNumResults() == 0)
        attention.push_back(op);
    });
    if (!attention.empty() && !tensorCores) {
      attention.front()->emitOpError()
          << "needs tensor cores (switchyard-gpu-tensor-core-matmul "
             "tensor-cores=true)";
      return signalPassFailure();
    }
    for (Operation *op : attention) {
      LLVM_DEBUG(llvm::dbgs()
                 << "[" DEBUG_TYPE "] flash attention: " << op->getName()
                 << " at " << op->getLoc() << "\n");
      if (auto forward = dyn_cast<moe::FlashAttentionKernelOp>(op))
        switchyard::tensor_cores::buildFlashAttentionKernel(rewriter, forward,
                                                            type);
      else
        switchyard::tensor_cores::buildFlashAttentionGradKernels(
            rewriter, cast<moe::FlashAttentionGradKernelOp>(op), type);
    }

    // The grouped expert kernels (buffers) on sm_80+; the rest stay for
    // switchyard-lower-grouped-kernels (SIMT, rounded factors).
    if (!tensorCores)
      return;
    SmallVector<Operation *> grouped;
    func.walk([&](Operation *op) {
      if (auto matmul = dyn_cast<moe::GroupedMatmulOp>(op)) {
        if (matmul.getNumResults() == 0 &&
            static_cast<int64_t>(matmul.getTileSize()) % kBlockM == 0)
          grouped.push_back(op);
      } else if (auto grad = dyn_cast<moe::GroupedWeightGradOp>(op)) {
        if (grad.getNumResults() == 0)
          grouped.push_back(op);
      }
    });
    for (Operation *op : grouped) {
      LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] mma.sync: " << op->getName()
                              << " at " << op->getLoc() << "\n");
      buildGroupedKernel(rewriter, op, type, policy);
      rewriter.eraseOp(op);
    }
  }
};
} // namespace

//===- InitSwitchyard.cpp - register Switchyard dialects and passes -------===//
//
// Implements the registration entry points used by switchyard-opt, the
// driver and the unit tests.
//
//===----------------------------------------------------------------------===//

#include "lib/InitSwitchyard.h"
#include "dialect/Lm/IR/LmDialect.h"
#include "dialect/Lm/Transforms/Passes.h"
#include "dialect/Moe/IR/MoeDialect.h"
#include "dialect/Moe/Transforms/Bufferization.h"
#include "dialect/Moe/Transforms/Passes.h"
#include "lib/Autodiff/Gradients.h"
#include "lib/Autodiff/Passes.h"
#include "lib/Conversion/Passes.h"
#include "lib/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/RuntimeOpVerification.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void mlir::switchyard::registerDialects(DialectRegistry &registry) {
  registry.insert<lm::LmDialect, moe::MoeDialect, arith::ArithDialect,
                  func::FuncDialect, linalg::LinalgDialect, math::MathDialect,
                  scf::SCFDialect, tensor::TensorDialect,
                  bufferization::BufferizationDialect, cf::ControlFlowDialect,
                  LLVM::LLVMDialect, memref::MemRefDialect,
                  vector::VectorDialect>();
  // What one-shot bufferization and buffer deallocation need to know about
  // the dialects the lowerings produce.
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  arith::registerBufferDeallocationOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  cf::registerBufferizableOpInterfaceExternalModels(registry);
  cf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  vector::registerBufferizableOpInterfaceExternalModels(registry);
  // Bounds checks of loads and stores (the GPU emulation's check-bounds).
  memref::registerRuntimeVerifiableOpInterfaceExternalModels(registry);
  // The gradient rules of reverse-mode differentiation.
  moe::registerGradientModels(registry);
  // The grouped expert kernels, which keep their op through bufferization.
  moe::registerBufferizableOpInterfaceExternalModels(registry);
  // What the GPU target produces.
  registerGpuDialects(registry);
}

void mlir::switchyard::registerPassesAndPipelines() {
  lm::registerLmPasses();
  moe::registerMoePasses();
  registerConversionPasses();
  registerAutodiffPasses();
  registerPipelines();
  // The upstream cleanups every pipeline uses.
  registerCanonicalizerPass();
  registerCSEPass();
  // Tensors to buffers, for tests of what the pipelines bufferize.
  bufferization::registerOneShotBufferizePass();
  // Upstream's launch sinking, which switchyard-gpu-sink-index-computations
  // replaces in the GPU pipeline: a test compares the two.
  registerGpuLaunchSinkIndexComputationsPass();
  // Upstream's linalg-to-loops lowerings, which switchyard-linalg-to-loops
  // replaces in the pipelines: a test compares them.
  registerConvertLinalgToLoopsPass();
  registerConvertLinalgToParallelLoopsPass();
}

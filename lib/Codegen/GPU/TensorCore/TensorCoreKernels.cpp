//===- TensorCoreKernels.cpp - what the tensor-core kernels share ---------===//
//
// The members of KernelBuilderBase that every tensor-core kernel builder
// uses (mma.sync, wgmma and flash attention alike): affine index
// arithmetic, the rounding of factors to the element type, the staging of
// runs of elements by vector loads where the host finds them aligned, and
// views of the launch's dynamic shared memory; and the replay of a
// contraction's casts on its raw operands. The mma.sync and ldmatrix
// members are in MmaSync.cpp.
//
//===----------------------------------------------------------------------===//

#include "TensorCoreKernels.h"

#include "lib/Codegen/Common/Contractions.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

using namespace mlir::switchyard::tensor_cores;

Value KernelBuilderBase::apply(AffineMap map, unsigned r, ValueRange operands) {
  OpFoldResult result = affine::makeComposedFoldedAffineApply(
      b, loc, map.getSubMap({r}), getAsOpFoldResult(operands));
  return getValueOrCreateConstantIndexOp(b, loc, result);
}

Value KernelBuilderBase::roundedFactor(Value raw) {
  // Element by element, or a vector of them at once.
  auto like = [&](Type element) -> Type {
    if (auto vector = dyn_cast<VectorType>(raw.getType()))
      return VectorType::get(vector.getShape(), element);
    return element;
  };
  Type f32 = like(b.getF32Type());
  if (raw.getType() != f32)
    raw = arith::ExtFOp::create(b, loc, f32, raw);
  return arith::TruncFOp::create(b, loc, like(elementType), raw);
}

MemRefType KernelBuilderBase::workgroupType(ArrayRef<int64_t> shape,
                                            Type type) {
  return MemRefType::get(
      shape, type, AffineMap(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
}

Value KernelBuilderBase::dynamicSharedMemory() {
  return gpu::DynamicSharedMemoryOp::create(
      b, loc, workgroupType({ShapedType::kDynamic}, b.getI8Type()));
}

Value KernelBuilderBase::runsAligned(Value buffer) {
  auto type = dyn_cast<MemRefType>(buffer.getType());
  if (!type || !type.isLastDimUnitStride() ||
      !type.getElementType().isIntOrFloat())
    return {};
  // The first element's address and every other stride a multiple of a
  // run: every run then starts at a multiple of its size in bytes.
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  Value pointer = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value start = add(pointer, mul(metadata.getOffset(), bytes));
  Value aligned = multipleOf(start, kRun * bytes);
  for (Value stride : metadata.getStrides().drop_back())
    aligned = both(aligned, multipleOf(stride, kRun));
  return aligned;
}

Value KernelBuilderBase::multipleOf(Value v, int64_t of) {
  Value rem = arith::RemUIOp::create(b, loc, v, cst(of));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rem, cst(0));
}

Value KernelBuilderBase::loadRun(Value buffer, ValueRange indices) {
  auto type = cast<MemRefType>(buffer.getType());
  return vector::LoadOp::create(
      b, loc, VectorType::get({kRun}, type.getElementType()), buffer, indices,
      /*nontemporal=*/false,
      llvm::MaybeAlign(kRun * type.getElementTypeBitWidth() / 8));
}

Value KernelBuilderBase::sharedView(Value shared, MemRefType type,
                                    int64_t offset) {
  return memref::ViewOp::create(b, loc, type, shared, cst(offset),
                                ValueRange{});
}

std::pair<Value, Value>
KernelBuilderBase::stagedElement(Value tid, int64_t threads, int64_t index,
                                 int64_t rows, int64_t cols,
                                 bool rowsContiguous) {
  // Element `index` of the thread is element index % kRun of its run
  // index / kRun; the runs are numbered with consecutive threads on
  // consecutive runs along the contiguous dimension.
  Value run = add(tid, cst(index / kRun * threads));
  Value offset = cst(index % kRun);
  Value runs = cst((rowsContiguous ? rows : cols) / kRun);
  Value along =
      add(mul(arith::RemUIOp::create(b, loc, run, runs), kRun), offset);
  Value across = arith::DivUIOp::create(b, loc, run, runs);
  if (rowsContiguous)
    return {along, across};
  return {across, along};
}

namespace mlir::switchyard::tensor_cores {

Value replayCasts(OpBuilder &b, Contraction &c, unsigned input, Value raw) {
  SmallVector<Operation *> casts;
  for (Value v = c.factors[input]; Operation *def = v.getDefiningOp();
       v = def->getOperand(0))
    casts.push_back(def);
  Value value = raw;
  for (Operation *cast : llvm::reverse(casts)) {
    Type type = cast->getResult(0).getType();
    if (auto vector = dyn_cast<VectorType>(value.getType()))
      type = VectorType::get(vector.getShape(), type);
    OperationState state(cast->getLoc(), cast->getName(), ValueRange{value},
                         TypeRange{type}, cast->getAttrs());
    value = b.create(state)->getResult(0);
  }
  return value;
}

} // namespace mlir::switchyard::tensor_cores

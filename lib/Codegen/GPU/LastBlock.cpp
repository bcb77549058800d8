//===- LastBlock.cpp - the last block of a kernel to finish ---------------===//

#include "lib/Codegen/GPU/LastBlock.h"
#include "lib/Codegen/Common/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

scf::IfOp mlir::switchyard::buildLastBlockIf(OpBuilder &b, Location loc,
                                             Value countingThread,
                                             Value counters, ValueRange indices,
                                             Value lastCount, Value flag,
                                             bool freeFlag) {
  Type i32 = b.getI32Type();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  gpu::BarrierOp::create(b, loc);
  {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, countingThread,
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    Value counted = memref::AtomicRMWOp::create(
        b, loc, arith::AtomicRMWKind::addi,
        arith::ConstantIntOp::create(b, loc, i32, 1), counters, indices);
    // Acquire in the counting thread itself, before the barrier that hands
    // the flag to the others (as CUTLASS's semaphore waits).
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    Value last = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       counted, lastCount);
    memref::StoreOp::create(b, loc, arith::ExtUIOp::create(b, loc, i32, last),
                            flag, ValueRange{zero});
  }
  gpu::BarrierOp::create(b, loc);
  auto read = memref::LoadOp::create(b, loc, flag, ValueRange{zero});
  if (freeFlag) {
    read->setAttr(kBlockUniformAttr, b.getUnitAttr());
    gpu::BarrierOp::create(b, loc);
  }
  Value isLast =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, read,
                            arith::ConstantIntOp::create(b, loc, i32, 0));
  auto lastBlock = scf::IfOp::create(b, loc, TypeRange{}, isLast,
                                     /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(lastBlock.thenBlock());
  NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
  return lastBlock;
}

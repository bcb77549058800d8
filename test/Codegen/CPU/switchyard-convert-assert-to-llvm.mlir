// RUN: switchyard-opt %s -split-input-file -verify-diagnostics --switchyard-convert-assert-to-llvm | FileCheck %s

// Each cf.assert becomes a branch to a block that prints its message and
// aborts, as upstream lowers it; a message used twice is one global.
// CHECK-DAG: llvm.func @puts(!llvm.ptr) -> i32
// CHECK-DAG: llvm.func @abort()
// CHECK-DAG: llvm.mlir.global private constant @[[IN:[^(]*]]("index out of bounds\00")
// CHECK-DAG: llvm.mlir.global private constant @[[NEG:[^(]*]]("negative\00")
// CHECK-LABEL: func.func @checks(
// CHECK-SAME: %[[I:.*]]: index, %[[N:.*]]: index)
// CHECK: %[[OK:.*]] = arith.cmpi ult, %[[I]], %[[N]]
// CHECK-NEXT: cf.cond_br %[[OK]], ^[[NEXT:.*]], ^[[FAIL:[^ ]*]]
// CHECK-NEXT: ^[[FAIL]]:
// CHECK-NEXT: %[[MSG:.*]] = llvm.mlir.addressof @[[IN]] : !llvm.ptr
// CHECK-NEXT: llvm.call @puts(%[[MSG]]) : (!llvm.ptr) -> i32
// CHECK-NEXT: llvm.call @abort() : () -> ()
// CHECK-NEXT: llvm.unreachable
// CHECK-NEXT: ^[[NEXT]]:
// CHECK-NEXT: %[[OK2:.*]] = arith.cmpi ult, %[[N]], %[[I]]
// CHECK-NEXT: cf.cond_br %[[OK2]], ^{{.*}}, ^[[FAIL2:[^ ]*]]
// CHECK: ^[[FAIL2]]:
// CHECK-NEXT: llvm.mlir.addressof @[[IN]] : !llvm.ptr
// CHECK: llvm.mlir.addressof @[[NEG]] : !llvm.ptr
// CHECK-NOT: cf.assert
// CHECK: return
func.func @checks(%i: index, %n: index) {
  %ok = arith.cmpi ult, %i, %n : index
  cf.assert %ok, "index out of bounds"
  %ok2 = arith.cmpi ult, %n, %i : index
  cf.assert %ok2, "index out of bounds"
  %c0 = arith.constant 0 : index
  %ok3 = arith.cmpi sge, %i, %c0 : index
  cf.assert %ok3, "negative"
  return
}

// -----

// A region of one block cannot take the branch.
func.func @in_loop(%n: index, %ok: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @below {{switchyard-convert-assert-to-llvm: in a single-block region}}
    cf.assert %ok, "in a loop"
  }
  return
}

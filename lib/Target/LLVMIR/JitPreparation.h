//===- JitPreparation.h - readying compiled modules for the JIT -*- C++ -*-===//
//
// What the compiler does to its LLVM-dialect output, and to the LLVM IR
// translated from it, before the JIT generates code: the runtime's engine
// (runtime/Engine/NativeCode.h) calls these between translation and code
// generation.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_TARGET_LLVMIR_JITPREPARATION_H
#define SWITCHYARD_LIB_TARGET_LLVMIR_JITPREPARATION_H

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace llvm {
class Module;
} // namespace llvm

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace mlir::switchyard {

/// Replaces each store of a struct or array value in `module` by stores of
/// its scalar fields, taken from the insertvalue chain that built it where
/// there is one (the chain is then deleted if nothing else uses it). An
/// entry point inlined into its C interface stores its results as one
/// aggregate of every memref descriptor; -O0 instruction selection
/// (FastISel, which optnone functions get) cannot select such a store, and
/// what it cannot select sends the rest of its block, here the whole
/// function, to SelectionDAG. LLVM's own pipeline splits these stores
/// (InstCombine) but skips optnone functions.
void storeAggregatesByField(llvm::Module &module);

/// Adds to `module` the packed entry point `_mlir_NAME` of each C
/// interface NAME (`_mlir_ciface_...`) it defines: `void (ptr arguments)`,
/// `arguments` pointing at one pointer per argument, to its value, then one
/// to where the result goes (the convention of mlir::ExecutionEngine's
/// packed functions); the runtime calls these.
void addPackedEntryPoints(llvm::Module &module);

/// Runs each loop nest of `module` that has the function attribute
/// `attribute` (switchyard-cpu-outline-loops' kParallelForAttr: its first
/// two arguments are its outermost loop's bounds, whose iterations are
/// independent, the attribute's value the loop's step) on the runtime's
/// threads: a function `NAME.task(ptr frame, i64 begin, i64 end)` runs the
/// iterations from begin to end with the other arguments from `frame`, and
/// each call becomes a call of `runtimeFunction(task, frame, lower, upper,
/// step)` (`switchyardParallelFor`, runtime/ComputeThreads.h), the other
/// arguments stored in a frame of the caller's first.
void dispatchParallelLoops(llvm::Module &module, llvm::StringRef attribute,
                           llvm::StringRef runtimeFunction);

/// In the optnone functions of `module`, replaces each extractvalue of an
/// insertvalue chain by the inserted value, and each load of an aggregate
/// whose users extract its fields by loads of those fields: -O0 instruction
/// selection (FastISel) selects neither insertvalue nor an aggregate load,
/// and what it cannot select sends the rest of its block to SelectionDAG.
/// The translation from the LLVM dialect builds each memref descriptor with
/// insertvalue and reads a C interface's arguments as aggregate loads.
void readAggregatesByField(llvm::Module &module);

/// Passes the arguments and the result of each internal optnone function of
/// `module` that returns an aggregate or takes more than `maxArguments`
/// arguments through a frame in the caller's memory: the function takes one
/// pointer, loads its arguments from the frame and stores its result there;
/// each caller stores the arguments before the call and loads the result's
/// fields after it, from one frame per callee (calls do not overlap). A
/// training step calls each layer's block functions with hundreds of
/// memref descriptor fields and gets an aggregate of descriptors back:
/// -O0 instruction selection (FastISel) cannot lower such a call, and
/// SelectionDAG, which then lowers it, takes far longer on it than on all
/// the loads and stores that replace it.
void passArgumentsInMemory(llvm::Module &module, unsigned maxArguments);
/// The argument count above which the engine's JIT passes arguments in
/// memory.
inline constexpr unsigned kMaxRegisterArguments = 32;

/// Splits each block of the optnone functions of `module` (the straight
/// lines of switchyard-cpu-outline-loops: the entry points) into blocks of
/// at most `maxInstructions`, after moving their allocations of a constant
/// size to the entry block. -O0 instruction selection goes bottom-up
/// through a block, and an instruction it cannot select sends the rest of
/// the block to SelectionDAG, whose scheduling time grows faster than
/// linearly with the block: in the JIT's large code model every load of a
/// global (a GPU program's loaded kernel module, before each launch) is
/// such an instruction, and a training step's host code is one block of
/// about 10^5 instructions.
void splitStraightLineBlocks(llvm::Module &module, unsigned maxInstructions);
/// The block length the engine's JIT cuts straight lines at.
inline constexpr unsigned kStraightLineBlockSize = 256;

/// Readies `module`, in the LLVM dialect, for the JIT:
/// - Every function but the C interfaces (`_mlir_ciface_NAME`) and the
///   global constructors and destructors becomes internal: the runtime
///   calls only the C interfaces (through their packed entry points,
///   addPackedEntryPoints), and what nothing calls any more (an entry
///   point inlined into its C interface) is deleted instead of compiled.
/// - Such a function that switchyard-cpu-outline-loops marked noinline
///   and optnone, and that nothing but its wrapper calls, is always-inlined
///   into its wrapper instead (which keeps optnone): the call between them
///   would pass every memref descriptor field as a scalar argument,
///   thousands on the stack, and its instruction selection and register
///   allocation would dominate code generation. One that other code calls
///   too (a gradient function that its training step calls) stays a
///   function: inlining would copy it into every caller.
/// - Argument and result attributes of other dialects than `llvm` (the
///   runtime's `lm.param`, `lm.vocab`, ..., read before the lowering) are
///   dropped: the translation to LLVM IR warns about each, with the whole
///   function printed (tens of megabytes of text for a training step).
void prepareForJit(ModuleOp module);

/// The functions of `module`'s global constructors and destructors
/// (`llvm.global_ctors`, `llvm.global_dtors`), each list in the order they
/// run (by priority); the lists are removed from the module and the
/// functions made external, so that the caller runs them itself, by name,
/// in the code it JIT-compiles now or in the object it loads later from
/// the compile cache (where nothing else would run them). The GPU target's
/// host code loads its kernel modules in constructors and unloads them in
/// destructors.
struct Structors {
  std::vector<std::string> constructors, destructors;
};
Structors detachStructors(llvm::Module &module);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_TARGET_LLVMIR_JITPREPARATION_H

//===- MoeDialect.td - Mixture-of-Experts routing dialect --*- tablegen -*-===//
//
// The `moe` dialect: expert routing (sigmoid gates, top-k selection) and the
// gathered per-expert projections of SwitchHead and sigma-MoE, on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_TD

include "dialect/Support/ShapeLimits.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/OpBase.td"

def Moe_Dialect : Dialect {
  let name = "moe";
  let cppNamespace = "::mlir::moe";
  let summary = "Mixture-of-Experts routing and gathered expert projections";
  let description = [{
    The `moe` dialect holds the routing computations of SwitchHead
    (arXiv 2312.07987) and of the sigma-MoE feed-forward layer, as value
    semantics on ranked tensors:

    * `moe.gate` computes sigmoid router scores `sigmoid(x · W_selᵀ)` in f32;
    * `moe.topk` selects the k best experts per token (and per head), with an
      optional expert-dropout mask; the gate values are the raw scores at the
      selected indices, never renormalised;
    * `moe.expert_proj` is the value-side projection of SwitchHead: each head
      sums, over its k selected experts, the gate-weighted products
      `x · W_V[h·E + e]`;
    * `moe.expert_merge` is the output-side projection: one gate-weighted
      reduction over heads × k routes of `o_h · W_O[h·E + e]`;
    * `moe.expert_mlp` is the sigma-MoE expert MLP
      `Σ_e gate_e · ReLU(x · W1[e]) · W2[e]`.

    Tokens are flattened into the leading dimension `N` (batch × time).
    Expert weights of all heads share one tensor whose leading dimension is
    `heads × experts`; expert `e` of head `h` is row `h·E + e`, the layout of
    the reference implementation, so checkpoints exchange by name and shape.
    Index tensors hold per-head expert numbers in `[0, E)`.
  }];
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

defvar Moe_ActivationTypes = [F32, F16, BF16];

/// Activations and weights: f32, f16 or bf16, of a fixed rank.
class Moe_ValueTensorOfRank<list<int> ranks>
    : TensorRankOf<Moe_ActivationTypes, ranks>;
/// Router scores and gate values: always f32 (router logits are fp32).
class Moe_ScoreTensorOfRank<list<int> ranks> : TensorRankOf<[F32], ranks>;
/// Expert indices: per-head expert numbers in [0, E).
class Moe_IndexTensorOfRank<list<int> ranks> : TensorRankOf<[I32, I64], ranks>;

class Moe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Moe_Dialect, mnemonic,
         !listconcat([Switchyard_BoundedShapes], traits)>;

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_TD

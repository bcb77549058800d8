//===- Kernels.h - reference kernels of the moe ops -------------*- C++ -*-===//
//
// The pieces of the moe lowerings that the gradient rules recompute: layer
// norm statistics, the rotary rotation (and its inverse), the causal
// attention weights, the addressing of stacked per-head expert weights and
// the dense route sums of the expert-weight gradients.
// One definition serves the forward lowering and the backward pass, so both
// compute the same thing.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_LIB_DIALECT_MOE_UTILS_KERNELS_H
#define SWITCHYARD_LIB_DIALECT_MOE_UTILS_KERNELS_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <utility>

namespace mlir {
class PatternRewriter;
} // namespace mlir

namespace mlir::switchyard {

/// The location of what a lowering or a gradient rule builds for `op`:
/// its own, named after its kind and `suffix` (`linear`, `linear_grad`), by
/// which the GPU kernel report tells what each kernel computes.
Location kindLocation(Operation *op, StringRef suffix = "");

/// Replaces `op` by `values`, cast to its result types where a lowering
/// built them more or less static than the op declares.
void replaceCast(PatternRewriter &rewriter, ImplicitLocOpBuilder &b,
                 Operation *op, ValueRange values);

/// Converts the f32 accumulator of a lowering to the type of `result`, an
/// op's result it replaces (element type, and a tensor.cast where the
/// lowering built it more or less static).
Value finish(ImplicitLocOpBuilder &b, Value accumulator, Value result);

/// Row `h·E + e` of a stacked per-head expert weight, for an integer expert
/// number `expert` read from an index tensor.
Value expertRow(ImplicitLocOpBuilder &b, Value head, Value expertsPerHead,
                Value expert);

/// E = dim(weight, 0) / H for a stacked [H·E, ...] weight, H = dim(gates, 1).
Value expertsPerHead(ImplicitLocOpBuilder &b, Value weight, Value gates);

/// Σ_j [route (n, h, j) picks expert row r] · gate(n, h, j) · value(n, h,
/// j, f), as a dense f32 tensor C [N, rows, width] (h = r / E, e = r mod E):
/// the route sums from which the expert-weight gradients are one dense
/// contraction over tokens. `gates` (or null for weight 1) and `indices` are
/// [N, H, K], or [N, K] for a single head; `value` reads the per-route
/// element.
Value routeSums(ImplicitLocOpBuilder &b, Value gates, Value indices,
                Value perHead, OpFoldResult rows, OpFoldResult width,
                function_ref<Value(ImplicitLocOpBuilder &, Value n, Value h,
                                   Value j, Value f)>
                    value);

/// Mean and 1/sqrt(var + eps) over the last dimension of x, as f32 tensors
/// of x's shape without its last dimension.
std::pair<Value, Value> layerNormStatistics(ImplicitLocOpBuilder &b, Value x,
                                            double eps);

/// The rotary embedding of x [B, L, H, F] at positions l - offset (+ start,
/// an index, where given); with `inverse`, the rotation by the opposite
/// angles (its transpose, which is the gradient of the forward rotation). F
/// must be static.
Value rotary(ImplicitLocOpBuilder &b, Value x, int64_t offset, bool inverse,
             Value start = {});

/// Row maxima and Σ exp(logit - max) over the last dimension of logits
/// (e.g. [B, T, V]), as f32 tensors of the leading dimensions ([B, T]):
/// logsumexp = log(sum) + max.
std::pair<Value, Value> softmaxStatistics(ImplicitLocOpBuilder &b,
                                          Value logits);

/// The token-averaged softmax of router logits z [N, E] and the row
/// statistics it came from.
struct RoutingMean {
  /// P [E] = mean over n of softmax(z[n, :]), f32.
  Value mean;
  /// Row maxima and exp-sums [N] (see softmaxStatistics).
  Value maxima, sums;
};
RoutingMean routingMean(ImplicitLocOpBuilder &b, Value logits);

/// Whether key u is visible to query t when the keys run `shift` positions
/// ahead of the queries (u <= t + shift).
Value attentionVisible(ImplicitLocOpBuilder &b, Value t, Value u, Value shift);

/// The distance t + shift - u of key u from query t, the row of the
/// relative keys that the pair reads.
Value relativeDistance(ImplicitLocOpBuilder &b, Value t, Value u, Value shift);

/// The skew of Transformer-XL's relative attention: for x [B, H, T, Δ]
/// indexed by distance, the f32 tensor [B, H, T, width] whose element
/// (b, a, t, u) is x[b, a, t, t + shift - u], 0 where that distance is
/// outside [0, Δ). Its own inverse up to the zeros: skewing a [.., S]
/// tensor into [.., Δ] reads key t + shift - δ at distance δ.
Value skewed(ImplicitLocOpBuilder &b, Value x, OpFoldResult width,
             Value shift);

/// The causal softmax weights [B, H, T, S] (f32, 0 where invisible) of
/// queries q [B, T, H, F] over keys k [B, S, H, F], with the optional
/// relative keys rel [S, H, F] added at distance t + shift - u. `shift`
/// (an index; null: S - T) is the key of the first query (moe.attention's
/// `at` position). The scores are contractions (q·kᵀ, and q·relᵀ over
/// every distance, skewed), with the keys in the unit-stride dimension.
Value attentionWeights(ImplicitLocOpBuilder &b, Value q, Value k, Value rel,
                       Value shift = {});

/// mask ? 0 : x / (1 - rate), element-wise, in x's element type: the
/// forward dropout and its gradient.
Value applyDropout(ImplicitLocOpBuilder &b, Value x, Value mask, double rate);

} // namespace mlir::switchyard

#endif // SWITCHYARD_LIB_DIALECT_MOE_UTILS_KERNELS_H

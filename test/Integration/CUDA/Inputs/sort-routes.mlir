// moe.sort_routes alone (../sort-routes.test): 2 heads of 5 experts, 3
// choices per head (repeats allowed), 16-row tiles; the positions as i64.
func.func @sort(%i: tensor<?x2x3xi32> {lm.vocab = 5 : i64}) -> (tensor<11xi64>, tensor<?xi64>, tensor<?x2x3xi64>, tensor<?xi64>) {
  %c0 = arith.constant 0 : index
  %c6 = arith.constant 6 : index
  %c10 = arith.constant 10 : index
  %c16 = arith.constant 16 : index
  %n = tensor.dim %i, %c0 : tensor<?x2x3xi32>
  %routes = arith.muli %n, %c6 : index
  %full = arith.ceildivui %routes, %c16 : index
  %tiles = arith.addi %full, %c10 : index
  %rows = arith.muli %tiles, %c16 : index
  %s0 = tensor.empty() : tensor<11xindex>
  %o0 = tensor.empty(%rows) : tensor<?xindex>
  %l0 = tensor.empty(%n) : tensor<?x2x3xindex>
  %t0 = tensor.empty(%tiles) : tensor<?xindex>
  %seg, %order, %slots, %te = moe.sort_routes ins(%i : tensor<?x2x3xi32>) outs(%s0, %o0, %l0, %t0 : tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>) experts_per_head(5) tile_size(16) -> tensor<11xindex>, tensor<?xindex>, tensor<?x2x3xindex>, tensor<?xindex>
  %a = arith.index_cast %seg : tensor<11xindex> to tensor<11xi64>
  %b = arith.index_cast %order : tensor<?xindex> to tensor<?xi64>
  %c = arith.index_cast %slots : tensor<?x2x3xindex> to tensor<?x2x3xi64>
  %d = arith.index_cast %te : tensor<?xindex> to tensor<?xi64>
  return %a, %b, %c, %d : tensor<11xi64>, tensor<?xi64>, tensor<?x2x3xi64>, tensor<?xi64>
}

// Contractions whose elementwise consumers the tensor-core kernels compute
// as they store (switchyard-mark-epilogues, ../epilogues.test): an
// activation whose input also escapes; a residual add with a dropout-like
// mask drawn from the element's indices, read through a reshape of the
// product (the loops collapsed); a consumer behind an independent matmul
// (a feed-forward layer's backward); and a split-K weight gradient whose
// consumer runs where the parts are added.

#x = affine_map<(m, n, k) -> (m, k)>
#wt = affine_map<(m, n, k) -> (n, k)>
#w = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (n)>
#id3 = affine_map<(b, s, n) -> (b, s, n)>

// relu(x · wᵀ + bias), and the product before the activation.
func.func @up_relu(%x: tensor<?x100xf32>, %w: tensor<70x100xf32>, %bias: tensor<70xf32>) -> (tensor<?x70xf32>, tensor<?x70xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x100xf32>
  %e = tensor.empty(%n) : tensor<?x70xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x70xf32>) -> tensor<?x70xf32>
  %p = linalg.generic {indexing_maps = [#x, #wt, #c],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x100xf32>, tensor<70x100xf32>) outs(%f : tensor<?x70xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x70xf32>
  %e2 = tensor.empty(%n) : tensor<?x70xf32>
  %h = linalg.generic {indexing_maps = [#id2, #row, #id2],
                       iterator_types = ["parallel", "parallel"]}
      ins(%p, %bias : tensor<?x70xf32>, tensor<70xf32>) outs(%e2 : tensor<?x70xf32>) {
  ^bb0(%v: f32, %b: f32, %o: f32):
    %s = arith.addf %v, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<?x70xf32>
  return %p, %h : tensor<?x70xf32>, tensor<?x70xf32>
}

// res + mask · (h · wᵀ) · 1.25 over [batch, 5, 40], the product computed
// as [batch · 5, 40]; the mask from the element's indices.
func.func @down_residual(%h: tensor<?x5x72xf32>, %w: tensor<40x72xf32>, %res: tensor<?x5x40xf32>) -> (tensor<?x5x40xi1>, tensor<?x5x40xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 1.25 : f32
  %b = tensor.dim %h, %c0 : tensor<?x5x72xf32>
  %flat = tensor.collapse_shape %h [[0, 1], [2]] : tensor<?x5x72xf32> into tensor<?x72xf32>
  %rows = tensor.dim %flat, %c0 : tensor<?x72xf32>
  %e = tensor.empty(%rows) : tensor<?x40xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x40xf32>) -> tensor<?x40xf32>
  %p = linalg.generic {indexing_maps = [#x, #wt, #c],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%flat, %w : tensor<?x72xf32>, tensor<40x72xf32>) outs(%f : tensor<?x40xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %m = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x40xf32>
  %p3 = tensor.expand_shape %p [[0, 1], [2]] output_shape [%b, 5, 40] : tensor<?x40xf32> into tensor<?x5x40xf32>
  %em = tensor.empty(%b) : tensor<?x5x40xi1>
  %ey = tensor.empty(%b) : tensor<?x5x40xf32>
  %mask, %y = linalg.generic {indexing_maps = [#id3, #id3, #id3, #id3],
                              iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p3, %res : tensor<?x5x40xf32>, tensor<?x5x40xf32>) outs(%em, %ey : tensor<?x5x40xi1>, tensor<?x5x40xf32>) {
  ^bb0(%v: f32, %r: f32, %om: i1, %oy: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %k = linalg.index 2 : index
    %c7 = arith.constant 7 : index
    %c3 = arith.constant 3 : index
    %c5 = arith.constant 5 : index
    %i7 = arith.muli %i, %c7 : index
    %j3 = arith.muli %j, %c3 : index
    %t = arith.addi %i7, %j3 : index
    %u = arith.addi %t, %k : index
    %mod = arith.remui %u, %c5 : index
    %keep = arith.cmpi ne, %mod, %c0 : index
    %sv = arith.mulf %v, %scale : f32
    %d = arith.select %keep, %sv, %zero : f32
    %out = arith.addf %r, %d : f32
    linalg.yield %keep, %out : i1, f32
  } -> (tensor<?x5x40xi1>, tensor<?x5x40xf32>)
  return %mask, %y : tensor<?x5x40xi1>, tensor<?x5x40xf32>
}

// A feed-forward layer's backward: dH = dY · W, then the weight gradient
// dW = Xᵀ · dY (independent of dH), then dH masked by the activation's
// sign; the mask reads dH behind the weight gradient's kernel.
func.func @ffn_backward(%dy: tensor<?x40xf32>, %w: tensor<40x70xf32>, %x: tensor<?x70xf32>, %pre: tensor<?x70xf32>) -> (tensor<?x70xf32>, tensor<70x40xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %dy, %c0 : tensor<?x40xf32>
  %e = tensor.empty(%n) : tensor<?x70xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x70xf32>) -> tensor<?x70xf32>
  %dh = linalg.generic {indexing_maps = [#x, #w, #c],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy, %w : tensor<?x40xf32>, tensor<40x70xf32>) outs(%f : tensor<?x70xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x70xf32>
  %ew = tensor.empty() : tensor<70x40xf32>
  %fw = linalg.fill ins(%zero : f32) outs(%ew : tensor<70x40xf32>) -> tensor<70x40xf32>
  %dw = linalg.generic {indexing_maps = [affine_map<(i, o, t) -> (t, i)>,
                                         affine_map<(i, o, t) -> (t, o)>,
                                         affine_map<(i, o, t) -> (i, o)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : tensor<?x70xf32>, tensor<?x40xf32>) outs(%fw : tensor<70x40xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<70x40xf32>
  %e2 = tensor.empty(%n) : tensor<?x70xf32>
  %g = linalg.generic {indexing_maps = [#id2, #id2, #id2],
                       iterator_types = ["parallel", "parallel"]}
      ins(%dh, %pre : tensor<?x70xf32>, tensor<?x70xf32>) outs(%e2 : tensor<?x70xf32>) {
  ^bb0(%v: f32, %p: f32, %o: f32):
    %pos = arith.cmpf ogt, %p, %zero : f32
    %r = arith.select %pos, %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<?x70xf32>
  return %g, %dw : tensor<?x70xf32>, tensor<70x40xf32>
}

// A weight gradient over a long K (split-K), scaled and added to a
// running sum: the consumer runs where the parts are added.
func.func @weight_grad_update(%x: tensor<?x40xf32>, %dy: tensor<?x33xf32>, %m: tensor<40x33xf32>) -> tensor<40x33xf32> {
  %zero = arith.constant 0.0 : f32
  %beta = arith.constant 0.9 : f32
  %e = tensor.empty() : tensor<40x33xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<40x33xf32>) -> tensor<40x33xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, o, t) -> (t, i)>,
                                        affine_map<(i, o, t) -> (t, o)>,
                                        affine_map<(i, o, t) -> (i, o)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dy : tensor<?x40xf32>, tensor<?x33xf32>) outs(%f : tensor<40x33xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<40x33xf32>
  %e2 = tensor.empty() : tensor<40x33xf32>
  %u = linalg.generic {indexing_maps = [#id2, #id2, #id2],
                       iterator_types = ["parallel", "parallel"]}
      ins(%g, %m : tensor<40x33xf32>, tensor<40x33xf32>) outs(%e2 : tensor<40x33xf32>) {
  ^bb0(%v: f32, %mv: f32, %o: f32):
    %bm = arith.mulf %mv, %beta : f32
    %r = arith.addf %bm, %v : f32
    linalg.yield %r : f32
  } -> tensor<40x33xf32>
  return %u : tensor<40x33xf32>
}

// The same with the mask drawn from a seed read from memory (a training
// step's dropout key): host code may not read the buffer, so the key's
// computation moves into the kernel that computes the consumer.
func.func @down_residual_seeded(%h: tensor<?x40xf32>, %w: tensor<24x40xf32>, %res: tensor<?x24xf32>, %seed: tensor<i32>) -> tensor<?x24xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %h, %c0 : tensor<?x40xf32>
  %e = tensor.empty(%n) : tensor<?x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x24xf32>) -> tensor<?x24xf32>
  %p = linalg.generic {indexing_maps = [#x, #wt, #c],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%h, %w : tensor<?x40xf32>, tensor<24x40xf32>) outs(%f : tensor<?x24xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x24xf32>
  %s0 = tensor.extract %seed[] : tensor<i32>
  %c7 = arith.constant 7 : i32
  %key = arith.muli %s0, %c7 : i32
  %ey = tensor.empty(%n) : tensor<?x24xf32>
  %y = linalg.generic {indexing_maps = [#id2, #id2, #id2],
                       iterator_types = ["parallel", "parallel"]}
      ins(%p, %res : tensor<?x24xf32>, tensor<?x24xf32>) outs(%ey : tensor<?x24xf32>) {
  ^bb0(%v: f32, %r: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %t = arith.addi %ii, %jj : i32
    %u = arith.addi %t, %key : i32
    %c3 = arith.constant 3 : i32
    %mod = arith.remui %u, %c3 : i32
    %c0i = arith.constant 0 : i32
    %keep = arith.cmpi ne, %mod, %c0i : i32
    %d = arith.select %keep, %v, %zero : f32
    %out = arith.addf %r, %d : f32
    linalg.yield %out : f32
  } -> tensor<?x24xf32>
  return %y : tensor<?x24xf32>
}

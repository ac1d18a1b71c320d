//===- MovementKernels.cpp - Transpose, Slice, Expand, Concat, Split, ... -===//
//
// Part of loom, under the Apache License v2.0.
//
// Pure data movement works on any dtype: elements are moved as raw words of
// the dtype's size. Transpose, Slice and Expand are one strided copy that
// differ only in the input strides:
//   transpose: out dim i walks input dim perm[i]    stride[i] = s[perm[i]]
//   slice:     out index n of dim d reads start_d + n * step_d
//              base = sum_d start_d * s[d],          stride[d] = step_d * s[d]
//   expand:    stretched dims do not move             stride[d] = 0
// Concat and Split copy contiguous blocks with memcpy. Embedding (a row
// gather) and Rotary live here too: both are index arithmetic, not math.
//===----------------------------------------------------------------------===//
#include "cpu/Kernels.h"
#include "cpu/Strided.h"
#include "lib/Diagnostics.h"

#include <cstring>

namespace loom::rt {
namespace {

template <typename Word>
void stridedCopyTyped(const Tensor &in, int64_t base, const Shape &inStrides, const Tensor &out,
                      ThreadPool &pool) {
  const Shape &shape = out.shape();
  StridedLoop loop(shape, {contiguousStrides(shape), inStrides});
  int64_t n = loop.innerSize(), s = loop.innerStride(1);
  const Word *x = in.as<Word>() + base;
  Word *y = out.as<Word>();
  loop.forEachRow(pool, [&](int64_t row) {
    Word *dst = y + loop.rowOffset(0, row);
    const Word *src = x + loop.rowOffset(1, row);
    if (s == 1)
      std::memcpy(dst, src, size_t(n) * sizeof(Word));
    else
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i * s];
  });
}

/// out[idx] = in[base + sum_d idx_d * inStrides[d]] for every out index.
void stridedCopy(const Tensor &in, int64_t base, const Shape &inStrides, const Tensor &out,
                 ThreadPool &pool) {
  switch (dtypeSize(out.dtype())) {
  case 1: stridedCopyTyped<uint8_t>(in, base, inStrides, out, pool); break;
  case 2: stridedCopyTyped<uint16_t>(in, base, inStrides, out, pool); break;
  case 4: stridedCopyTyped<uint32_t>(in, base, inStrides, out, pool); break;
  case 8: stridedCopyTyped<uint64_t>(in, base, inStrides, out, pool); break;
  }
}

/// Element `i` of an index tensor (i64 or i32) as int64.
int64_t indexAt(const Tensor &t, int64_t i) {
  return t.dtype() == DType::I64 ? t.as<int64_t>()[i] : t.as<int32_t>()[i];
}

/// Concat and Split as one routine: the tensor `whole` is the pieces laid
/// side by side along `axis`. View it as [outer, axis, inner]: piece k covers
/// columns [at_k, at_k + len_k) of every outer row, len_k * inner elements
/// contiguous in both tensors.
void blockCopy(const Tensor &whole, const std::vector<Tensor> &pieces, size_t axis, bool gather,
               ThreadPool &pool) {
  const Shape &shape = whole.shape();
  size_t es = dtypeSize(whole.dtype());
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  int64_t wholeRow = shape[axis] * inner * int64_t(es);
  pool.parallelFor(outer, std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, wholeRow)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      auto *w = static_cast<uint8_t *>(whole.data) + o * wholeRow;
      for (const Tensor &piece : pieces) {
        int64_t bytes = piece.shape()[axis] * inner * int64_t(es);
        auto *p = static_cast<uint8_t *>(piece.data) + o * bytes;
        if (gather)
          std::memcpy(w, p, size_t(bytes));
        else
          std::memcpy(p, w, size_t(bytes));
        w += bytes;
      }
    }
  });
}

} // namespace

bool runTranspose(const KernelCall &c, ThreadPool &pool, std::string &) {
  Shape own = contiguousStrides(c.in[0].shape()), strides;
  for (int64_t d : c.instr->ints) strides.push_back(own[size_t(d)]);
  stridedCopy(c.in[0], 0, strides, c.out[0], pool);
  return true;
}

bool runSlice(const KernelCall &c, ThreadPool &pool, std::string &) {
  Shape own = contiguousStrides(c.in[0].shape()), strides;
  int64_t base = 0;
  for (size_t d = 0; d < own.size(); ++d) {
    base += c.instr->ints[2 * d] * own[d];
    strides.push_back(c.instr->ints[2 * d + 1] * own[d]);
  }
  if (c.out[0].numel() > 0) // an empty window may start anywhere
    stridedCopy(c.in[0], base, strides, c.out[0], pool);
  return true;
}

bool runExpand(const KernelCall &c, ThreadPool &pool, std::string &) {
  stridedCopy(c.in[0], 0, broadcastStrides(c.in[0].shape(), c.out[0].shape()), c.out[0], pool);
  return true;
}

bool runConcat(const KernelCall &c, ThreadPool &pool, std::string &) {
  blockCopy(c.out[0], c.in, size_t(c.instr->ints[0]), /*gather=*/true, pool);
  return true;
}

bool runSplit(const KernelCall &c, ThreadPool &pool, std::string &) {
  blockCopy(c.in[0], c.out, size_t(c.instr->ints[0]), /*gather=*/false, pool);
  return true;
}

// out[..., :] = table[ids[...], :]. Every id is checked before any row moves.
bool runEmbedding(const KernelCall &c, ThreadPool &pool, std::string &err) {
  const Tensor &table = c.in[0], &ids = c.in[1];
  int64_t vocab = table.shape()[0];
  int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = indexAt(ids, i);
    if (id < 0 || id >= vocab) {
      err = cat("id ", id, " at position ", i, " out of range [0, ", vocab, ")");
      return false;
    }
  }
  size_t rowBytes = size_t(table.shape()[1]) * dtypeSize(table.dtype());
  const auto *src = static_cast<const uint8_t *>(table.data);
  auto *dst = static_cast<uint8_t *>(c.out[0].data);
  pool.parallelFor(n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      std::memcpy(dst + size_t(i) * rowBytes, src + size_t(indexAt(ids, i)) * rowBytes, rowBytes);
  });
  return true;
}

// out = x * cos + rotate_half(x) * sin over the last dim D, where
// rotate_half(x)[d] = -x[d + D/2] for d < D/2 and x[d - D/2] otherwise.
// cos and sin broadcast to x, usually [T, D] against [B, H, T, D].
namespace {
template <typename T> void rotaryTyped(const KernelCall &c, ThreadPool &pool) {
  const Tensor &x = c.in[0], &cosT = c.in[1], &sinT = c.in[2];
  const Shape &shape = x.shape();
  int64_t D = shape.back(), half = D / 2, rows = D ? x.numel() / D : 0;
  Shape rowShape(shape.begin(), shape.end() - 1);
  Shape cs = broadcastStrides(cosT.shape(), shape), ss = broadcastStrides(sinT.shape(), shape);
  int64_t cd = cs.back(), sd = ss.back(); // 0 when the table has one column
  cs.pop_back();
  ss.pop_back();
  const T *xp = x.as<T>(), *cp = cosT.as<T>(), *sp = sinT.as<T>();
  T *yp = c.out[0].as<T>();
  pool.parallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, D)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = xp + r * D;
      const T *cr = cp + offsetOf(r, rowShape, cs), *sr = sp + offsetOf(r, rowShape, ss);
      T *yr = yp + r * D;
      for (int64_t d = 0; d < half; ++d)
        yr[d] = T(double(xr[d]) * cr[d * cd] - double(xr[d + half]) * sr[d * sd]);
      for (int64_t d = half; d < D; ++d)
        yr[d] = T(double(xr[d]) * cr[d * cd] + double(xr[d - half]) * sr[d * sd]);
    }
  });
}
} // namespace

bool runRotary(const KernelCall &c, ThreadPool &pool, std::string &) {
  if (c.out[0].dtype() == DType::F64)
    rotaryTyped<double>(c, pool);
  else
    rotaryTyped<float>(c, pool);
  return true;
}

} // namespace loom::rt

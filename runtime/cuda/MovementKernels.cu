//===- MovementKernels.cu - Transpose, Slice, Expand, Concat, Split, ... --===//
//
// Part of loom, under the Apache License v2.0.
//
// Data movement on any dtype, elements moved as raw words of the dtype's
// size. As in the CPU backend (cpu/MovementKernels.cpp), transpose, slice
// and expand are one strided copy that differ only in the input strides:
//   transpose: out dim i walks input dim perm[i]    stride[i] = s[perm[i]]
//   slice:     out index n of dim d reads start_d + n * step_d
//   expand:    stretched dims do not move             stride[d] = 0
// SliceGrad is the same walk with the roles swapped (a scatter into zeros).
// Concat and Split view the whole tensor as [outer, axis, inner] and move
// one piece per launch. Embedding and Rotary are index arithmetic too.
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"
#include "cuda/Fp8Amax.cuh"
#include "cuda/Fp8Cuda.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace loom::rt::cuda {
namespace {

/// y[map0(i)] = x[map1(i)] for every flat index i of the walked shape.
template <typename Word>
__global__ void stridedCopyKernel(const Word *x, Word *y, int64_t n, StridedMap<2> map) {
  LOOM_GRID_STRIDE(i, n) {
    int64_t off[2];
    map.offsets(i, off);
    y[off[0]] = x[off[1]];
  }
}

/// The same walk converting f32 <-> bf16 (a transpose with autocast's cast
/// folded into it): y[map0(i)] = x[map1(i)], widened or rounded like Cast.
/// `amax` (here and below): a fused fp8 amax output (cuda/Fp8Amax.cuh), or null.
__global__ void stridedConvertKernel(FloatIn x, FloatOut y, int64_t n, StridedMap<2> map,
                                     uint32_t *amax) {
  uint32_t m = 0;
  LOOM_GRID_STRIDE(i, n) {
    int64_t off[2];
    map.offsets(i, off);
    float v = x[off[1]];
    y.store(off[0], v);
    maxStored(amax, m, y, v);
  }
  flushAmax(amax, m);
}

/// A transpose that keeps the last dim in place (the head split and merge
/// [B, T, H, D] <-> [B, H, T, D]) moves whole rows of D elements: when D %
/// 8 == 0 it walks packs of 8 (one StridedMap lookup per pack, 16-byte
/// accesses) instead of single elements. `map` walks the packs; offsets
/// come back in elements. Same-dtype packs move raw 16-byte words.
/// With `amax` the words are bf16 (kWords 1) or f32 (kWords 2) values.
template <int kWords> // 16-byte words per pack: 1 for 2-byte dtypes, 2 for 4-byte
__global__ void packedCopyKernel(const uint4 *x, uint4 *y, int64_t packs, StridedMap<2> map,
                                 uint32_t *amax) {
  uint32_t m = 0;
  LOOM_GRID_STRIDE(j, packs) {
    int64_t off[2];
    map.offsets(j, off);
    for (int w = 0; w < kWords; ++w) {
      uint4 v = x[off[1] / kPack * kWords + w];
      y[off[0] / kPack * kWords + w] = v;
      if (amax)
        for (uint32_t u : {v.x, v.y, v.z, v.w})
          m = kWords == 1 ? max(m, max(bf16AbsBits(u & 0xffffu), bf16AbsBits(u >> 16)))
                          : max(m, u & 0x7fffffffu);
    }
  }
  flushAmax(amax, m);
}

__global__ void packedConvertKernel(FloatIn x, FloatOut y, int64_t packs, StridedMap<2> map,
                                    uint32_t *amax) {
  uint32_t m = 0;
  LOOM_GRID_STRIDE(j, packs) {
    int64_t off[2];
    map.offsets(j, off);
    Pack p = load8(x, off[1]);
    store8(y, off[0], p);
    for (int k = 0; k < kPack; ++k) maxStored(amax, m, y, p.v[k]);
  }
  flushAmax(amax, m);
}

/// The packed walk of a transpose, if it applies: the input's last dim is
/// the output's, contiguous, a multiple of 8 long, and both buffers are
/// 16-byte aligned.
bool packedTranspose(const CudaCall &c, const Shape &strides, CudaContext &ctx) {
  const Shape &shape = c.out[0].shape();
  size_t width = dtypeSize(c.in[0].dtype()), outWidth = dtypeSize(c.out[0].dtype());
  if (shape.empty() || strides.back() != 1 || shape.back() % kPack ||
      !packable(c.out[0].numel(), {&c.in[0], &c.out[0]}) || (width != 2 && width != 4) ||
      (outWidth != 2 && outWidth != 4))
    return false;
  Shape packShape = shape, outStrides = contiguousStrides(shape), inStrides = strides;
  packShape.back() /= kPack;
  outStrides.back() = inStrides.back() = kPack;
  int64_t packs = c.out[0].numel() / kPack;
  if (packs == 0) return true;
  auto map = makeStridedMap<2>(packShape, {outStrides, inStrides});
  const auto *x = static_cast<const uint4 *>(c.in[0].data);
  auto *y = static_cast<uint4 *>(c.out[0].data);
  uint32_t *amax = fusedAmaxBits(c, 0);
  if (c.in[0].dtype() != c.out[0].dtype())
    packedConvertKernel<<<gridFor(packs), kThreads, 0, ctx.stream>>>(
        floatIn(c.in[0]), floatOut(c.out[0]), packs, map, amax);
  else if (width == 2)
    packedCopyKernel<1><<<gridFor(packs), kThreads, 0, ctx.stream>>>(x, y, packs, map, amax);
  else
    packedCopyKernel<2><<<gridFor(packs), kThreads, 0, ctx.stream>>>(x, y, packs, map, amax);
  return true;
}

/// dst[dstStrides . idx] = src[srcStrides . idx] over `shape`.
void stridedCopy(const void *src, const Shape &srcStrides, void *dst, const Shape &dstStrides,
                 const Shape &shape, DType t, cudaStream_t stream) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n == 0) return;
  auto map = makeStridedMap<2>(shape, {dstStrides, srcStrides});
  switch (dtypeSize(t)) {
  case 1: stridedCopyKernel<<<gridFor(n), kThreads, 0, stream>>>(static_cast<const uint8_t *>(src), static_cast<uint8_t *>(dst), n, map); break;
  case 2: stridedCopyKernel<<<gridFor(n), kThreads, 0, stream>>>(static_cast<const uint16_t *>(src), static_cast<uint16_t *>(dst), n, map); break;
  case 4: stridedCopyKernel<<<gridFor(n), kThreads, 0, stream>>>(static_cast<const uint32_t *>(src), static_cast<uint32_t *>(dst), n, map); break;
  case 8: stridedCopyKernel<<<gridFor(n), kThreads, 0, stream>>>(static_cast<const uint64_t *>(src), static_cast<uint64_t *>(dst), n, map); break;
  }
}

/// Base offset and strides of the slice window `ints` (start, step per dim)
/// in a contiguous tensor of `shape`.
int64_t sliceWindow(const Shape &shape, const std::vector<int64_t> &ints, Shape &strides) {
  Shape own = contiguousStrides(shape);
  int64_t base = 0;
  strides.clear();
  for (size_t d = 0; d < own.size(); ++d) {
    base += ints[2 * d] * own[d];
    strides.push_back(ints[2 * d + 1] * own[d]);
  }
  return base;
}

const uint8_t *bytesAt(const DevTensor &t, int64_t elems) {
  return static_cast<const uint8_t *>(t.data) + elems * int64_t(dtypeSize(t.dtype()));
}

/// Concat (gather) or Split (scatter): piece k covers columns [at_k, at_k +
/// len_k) of the whole's [outer, axis, inner] view. Each piece is a 2-D
/// copy of `outer` rows, which cudaMemcpy2DAsync does at copy-engine speed.
void blockCopy(const DevTensor &whole, const std::vector<DevTensor> &pieces, size_t axis,
               bool gather, cudaStream_t stream) {
  const Shape &shape = whole.shape();
  size_t es = dtypeSize(whole.dtype());
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  size_t wholeRow = size_t(shape[axis] * inner) * es;
  size_t at = 0;
  for (const DevTensor &piece : pieces) {
    size_t bytes = size_t(piece.shape()[axis] * inner) * es;
    auto *w = static_cast<uint8_t *>(whole.data) + at;
    if (bytes && outer) {
      if (gather)
        cudaMemcpy2DAsync(w, wholeRow, piece.data, bytes, bytes, size_t(outer),
                          cudaMemcpyDeviceToDevice, stream);
      else
        cudaMemcpy2DAsync(piece.data, bytes, w, wholeRow, bytes, size_t(outer),
                          cudaMemcpyDeviceToDevice, stream);
    }
    at += bytes;
  }
}

// out[n, :] = table[ids[n], :]; a bad id is reported and its row left alone.
template <typename Word>
__global__ void embeddingKernel(const Word *table, const void *ids, bool ids64, Word *out,
                                int64_t n, int64_t rowWords, int64_t vocab, DeviceError *err,
                                int instr) {
  LOOM_GRID_STRIDE(i, n * rowWords) {
    int64_t pos = i / rowWords, col = i % rowWords;
    int64_t id = indexAt(ids, ids64, pos);
    if (id < 0 || id >= vocab) {
      if (col == 0) reportError(err, instr, 0, id, pos, vocab);
      continue;
    }
    out[i] = table[id * rowWords + col];
  }
}

// Rotary forward (sign = +1) and backward (sign = -1), over the last dim D:
//   forward:  y[d] = x[d] cos[d] - x[d + D/2] sin[d]          d < D/2
//             y[d] = x[d] cos[d] + x[d - D/2] sin[d]          d >= D/2
//   backward: dx[d] = dy[d] cos[d] + dy[d + D/2] sin[d + D/2] d < D/2
//             dx[d] = dy[d] cos[d] - dy[d - D/2] sin[d - D/2] d >= D/2
// The forward's sin index is the output position d, the backward's is the
// partner's; cos and sin broadcast to x through row offsets (cmap) and a
// per-column stride (0 when the table has one column).
// x (dy) and y (dx) may be bf16 storage of the f32 computation; the tables
// are f32.
/// One output element: x cos + sign partner sin, in double, rounded once.
/// (The table entries come widened: the packed kernel widens them once for
/// several rows; both products are exact, so the order does not matter.)
__device__ inline float rotated(float x, float partner, double c, double s, double sign) {
  double v = double(x) * c;
  v += sign * double(partner) * s;
  return float(v);
}

__global__ void rotaryKernel(FloatIn x, const float *cosT, const float *sinT, FloatOut y,
                             int64_t rows, int64_t D, StridedMap<2> rowMap, int64_t cd,
                             int64_t sd, bool backward) {
  int64_t half = D / 2;
  LOOM_GRID_STRIDE(i, rows * D) {
    int64_t r = i / D, d = i % D;
    int64_t off[2];
    rowMap.offsets(r, off);
    const float *cr = cosT + off[0], *sr = sinT + off[1];
    bool low = d < half;
    int64_t partner = low ? d + half : d - half;
    double sign = (low != backward) ? -1.0 : 1.0;
    y.store(i, rotated(x[r * D + d], x[r * D + partner], cr[d * cd],
                       sr[(backward ? partner : d) * sd], sign));
  }
}

/// Eight consecutive f32 table entries from t, 16-byte aligned when `vec`.
__device__ inline Pack tableRow8(const float *t, int64_t stride, bool vec) {
  if (vec) return load8(FloatIn{t, false}, 0);
  Pack p;
#pragma unroll
  for (int k = 0; k < kPack; ++k) p.v[k] = t[k * stride];
  return p;
}

/// rotaryKernel with a thread per (row, eight columns of the low half) and
/// `Rows` rows that share their table rows: it reads the eight columns and
/// their eight partners with 16-byte accesses and writes both outputs, so a
/// row's table offsets and the divisions cost once per 16 Rows elements
/// (D % 16 == 0, aligned rows). With `vecTables` (contiguous, 16-byte
/// aligned table rows) the cos and sin entries load four at a time.
///
/// Why Rows: exports broadcast the tables over heads ([B, 1, T, D] against
/// q's [B, H, T, D]), and a thread per row read 32 table floats (128 bytes
/// of L2 traffic) for 16 bf16 elements (64 bytes of x and y). The tables
/// then dominated the kernel's traffic, and it ran at 1.2-1.6 TB/s. Rows
/// rows of one broadcast dimension (`bcast` rows long, `inner` rows apart)
/// read the tables once and convert them to double once.
///
/// Each element is rotated(), as in rotaryKernel: the same bits (a double
/// made from a float is exact either way).
template <int Rows>
__global__ void rotaryPackedKernel(FloatIn x, const float *cosT, const float *sinT, FloatOut y,
                                   int64_t rows, int64_t D, StridedMap<2> rowMap, int64_t cd,
                                   int64_t sd, int64_t bcast, int64_t inner, bool backward,
                                   bool vecTables) {
  const int64_t half = D / 2, groups = half / kPack, blocks = bcast / Rows;
  const double signLo = backward ? 1.0 : -1.0;
  LOOM_GRID_STRIDE(item, rows / Rows * groups) {
    // item = ((outer * blocks + block) * inner + lo) * groups + group
    int64_t t = item / groups, d0 = item % groups * kPack;
    int64_t lo = t % inner;
    t /= inner;
    int64_t r0 = ((t / blocks) * bcast + t % blocks * Rows) * inner + lo;
    int64_t off[2];
    rowMap.offsets(r0, off);
    const float *cr = cosT + off[0], *sr = sinT + off[1];
    Pack cl = tableRow8(cr + d0 * cd, cd, vecTables), ch = tableRow8(cr + (d0 + half) * cd, cd, vecTables);
    Pack sl = tableRow8(sr + d0 * sd, sd, vecTables), sh = tableRow8(sr + (d0 + half) * sd, sd, vecTables);
    // an element (d0 + k) and its partner (d0 + k + half); the forward's
    // sin is the output's entry, the backward's the partner's
    double cLo[kPack], cHi[kPack], sLo[kPack], sHi[kPack];
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      cLo[k] = cl.v[k];
      cHi[k] = ch.v[k];
      sLo[k] = backward ? sh.v[k] : sl.v[k];
      sHi[k] = backward ? sl.v[k] : sh.v[k];
    }
#pragma unroll
    for (int j = 0; j < Rows; ++j) {
      int64_t at = (r0 + j * inner) * D + d0;
      Pack xl = load8(x, at), xh = load8(x, at + half), yl, yh;
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        yl.v[k] = rotated(xl.v[k], xh.v[k], cLo[k], sLo[k], signLo);
        yh.v[k] = rotated(xh.v[k], xl.v[k], cHi[k], sHi[k], -signLo);
      }
      store8(y, at, yl);
      store8(y, at + half, yh);
    }
  }
}

/// The broadcast dimension rotaryPackedKernel shares table rows along: the
/// longest row dimension along which neither table moves, as
/// {extent, rows between its steps}; {1, rows} when there is none.
std::pair<int64_t, int64_t> tableBroadcastDim(const Shape &rowShape, const Shape &cs,
                                              const Shape &ss) {
  std::pair<int64_t, int64_t> best{1, 1};
  int64_t inner = 1;
  for (size_t d = rowShape.size(); d-- > 0;) {
    if (cs[d] == 0 && ss[d] == 0 && rowShape[d] > best.first) best = {rowShape[d], inner};
    inner *= rowShape[d];
  }
  if (best.first == 1) best.second = inner;
  return best;
}

/// The rows a rotaryPackedKernel thread takes, for a broadcast dim of
/// `bcast` rows and `items` (row, pack) pairs: twice as many while they
/// divide the broadcast dim, up to eight, and leave 64k threads. Fewer
/// threads, as for llama-1b's k ([4, 2048, 8, 64]: 32k at eight rows), no
/// longer cover the GPU's memory latency. Measured on llama-1b's step
/// (H200, bench/gpu/h200-2026-11-29-g): q's rotary and its gradient took
/// 1.28 ms at one row a thread and 1.10 at eight; k's 0.47 at one, 0.42 at
/// four and 0.50 at eight. LOOM_CUDA_ROTARY_ROWS=1, 2, 4 or 8 sets the most
/// rows and drops the thread floor (to time the choices in one binary, and
/// for the tests' small shapes); every choice gives the same bits.
int rotaryRowsPerThread(int64_t bcast, int64_t items) {
  const char *e = std::getenv("LOOM_CUDA_ROTARY_ROWS");
  int most = e ? std::atoi(e) : 8;
  if (most != 1 && most != 2 && most != 4) most = 8;
  const int64_t floor = e ? 1 : int64_t(1) << 16;
  int rows = 1;
  while (rows < most && bcast % (2 * rows) == 0 && items / (2 * rows) >= floor) rows *= 2;
  return rows;
}

void rotary(const CudaCall &c, CudaContext &ctx, bool backward) {
  const DevTensor &x = c.in[0], &cosT = c.in[1], &sinT = c.in[2];
  const Shape &shape = x.shape();
  int64_t D = shape.back(), rows = D ? x.numel() / D : 0;
  if (rows == 0) return;
  Shape cs = broadcastStrides(cosT.shape(), shape), ss = broadcastStrides(sinT.shape(), shape);
  int64_t cd = cs.back(), sd = ss.back();
  cs.pop_back();
  ss.pop_back();
  Shape rowShape(shape.begin(), shape.end() - 1);
  if (rowShape.empty()) { // a single row: offsets are 0
    rowShape = {1};
    cs = ss = {0};
  }
  auto map = makeStridedMap<2>(rowShape, {cs, ss});
  if (D % (2 * kPack) == 0 && rowsPackable(D, {&x, &c.out[0]})) {
    // Table rows start 16-byte aligned when the tables do and every row
    // stride is a multiple of four entries (d0 is a multiple of eight).
    bool vec = cd == 1 && sd == 1 && reinterpret_cast<uintptr_t>(cosT.data) % 16 == 0 &&
               reinterpret_cast<uintptr_t>(sinT.data) % 16 == 0;
    for (int64_t st : cs) vec = vec && st % 4 == 0;
    for (int64_t st : ss) vec = vec && st % 4 == 0;
    std::pair<int64_t, int64_t> along = tableBroadcastDim(rowShape, cs, ss);
    int64_t bcast = along.first, inner = along.second;
    int rowsPerThread = rotaryRowsPerThread(bcast, rows * (D / (2 * kPack)));
    auto launch = [&](auto kernel, int per) {
      kernel<<<gridFor(rows / per * (D / (2 * kPack))), kThreads, 0, ctx.stream>>>(
          floatIn(x), cosT.as<float>(), sinT.as<float>(), floatOut(c.out[0]), rows, D, map, cd,
          sd, bcast, inner, backward, vec);
    };
    switch (rowsPerThread) {
    case 8: launch(rotaryPackedKernel<8>, 8); break;
    case 4: launch(rotaryPackedKernel<4>, 4); break;
    case 2: launch(rotaryPackedKernel<2>, 2); break;
    default: launch(rotaryPackedKernel<1>, 1); break;
    }
    return;
  }
  rotaryKernel<<<gridFor(rows * D), kThreads, 0, ctx.stream>>>(
      floatIn(x), cosT.as<float>(), sinT.as<float>(), floatOut(c.out[0]), rows, D, map, cd, sd,
      backward);
}

/// dst[r, c] = src[r, c] inside the source's rows x cols, 0 outside it,
/// for every r < dstRows, c < dstCols (row pitches srcLd, dstLd): a matrix
/// copied into a zero-padded one, or a padded one's top-left corner copied
/// out, zeros and all in one pass (cudaMemcpy2DAsync would need a memset
/// first). A block walks whole rows, consecutive threads consecutive
/// elements, so both sides move in full sectors whatever the pitches.
template <typename Word>
__global__ void paddedCopyKernel(const Word *src, int64_t srcLd, int64_t rows, int64_t cols,
                                 Word *dst, int64_t dstLd, int64_t dstRows, int64_t dstCols) {
  for (int64_t r = blockIdx.y; r < dstRows; r += gridDim.y)
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < dstCols;
         c += int64_t(gridDim.x) * blockDim.x)
      dst[r * dstLd + c] = r < rows && c < cols ? src[r * srcLd + c] : Word(0);
}

} // namespace

void copyPadded(const void *src, int64_t srcLd, int64_t rows, int64_t cols, void *dst,
                int64_t dstLd, int64_t dstRows, int64_t dstCols, size_t elemBytes,
                cudaStream_t stream) {
  if (dstRows <= 0 || dstCols <= 0) return;
  // Enough blocks across a row for a few elements per thread, and rows
  // down the grid's y (at most 65535; the kernel strides).
  dim3 grid(unsigned(std::min<int64_t>((dstCols + kThreads * 4 - 1) / (kThreads * 4), 64)),
            unsigned(std::min<int64_t>(dstRows, 65535)));
  if (elemBytes == 2)
    paddedCopyKernel<<<grid, kThreads, 0, stream>>>(static_cast<const uint16_t *>(src), srcLd, rows,
                                                    cols, static_cast<uint16_t *>(dst), dstLd,
                                                    dstRows, dstCols);
  else
    paddedCopyKernel<<<grid, kThreads, 0, stream>>>(static_cast<const uint32_t *>(src), srcLd, rows,
                                                    cols, static_cast<uint32_t *>(dst), dstLd,
                                                    dstRows, dstCols);
}

void launchTranspose(const CudaCall &c, CudaContext &ctx) {
  Shape own = contiguousStrides(c.in[0].shape()), strides;
  for (int64_t d : c.instr->ints) strides.push_back(own[size_t(d)]);
  const Shape &shape = c.out[0].shape();
  if (packedTranspose(c, strides, ctx))
    return;
  if (c.in[0].dtype() == c.out[0].dtype()) {
    stridedCopy(c.in[0].data, strides, c.out[0].data, contiguousStrides(shape), shape,
                c.out[0].dtype(), ctx.stream);
    amaxAfterKernel(c, ctx); // the word copy knows no values: a pass over the output
    return;
  }
  // f32 <-> bf16 (validate() allows no other pair): a transposing cast.
  int64_t n = c.out[0].numel();
  if (n == 0) return;
  auto map = makeStridedMap<2>(shape, {contiguousStrides(shape), strides});
  stridedConvertKernel<<<gridFor(n), kThreads, 0, ctx.stream>>>(
      floatIn(c.in[0]), floatOut(c.out[0]), n, map, fusedAmaxBits(c, 0));
}

void launchSlice(const CudaCall &c, CudaContext &ctx) {
  if (c.out[0].numel() == 0) return; // an empty window may start anywhere
  Shape strides;
  int64_t base = sliceWindow(c.in[0].shape(), c.instr->ints, strides);
  const Shape &shape = c.out[0].shape();
  stridedCopy(bytesAt(c.in[0], base), strides, c.out[0].data, contiguousStrides(shape), shape,
              c.out[0].dtype(), ctx.stream);
}

void launchSliceGrad(const CudaCall &c, CudaContext &ctx) {
  const DevTensor &dy = c.in[0], &out = c.out[0];
  cudaMemsetAsync(out.data, 0, out.desc->bytes, ctx.stream);
  if (dy.numel() == 0) return;
  Shape strides;
  int64_t base = sliceWindow(out.shape(), c.instr->ints, strides);
  const Shape &shape = dy.shape();
  stridedCopy(dy.data, contiguousStrides(shape), const_cast<uint8_t *>(bytesAt(out, base)),
              strides, shape, out.dtype(), ctx.stream);
}

void launchExpand(const CudaCall &c, CudaContext &ctx) {
  const Shape &shape = c.out[0].shape();
  stridedCopy(c.in[0].data, broadcastStrides(c.in[0].shape(), shape), c.out[0].data,
              contiguousStrides(shape), shape, c.out[0].dtype(), ctx.stream);
}

void launchConcat(const CudaCall &c, CudaContext &ctx) {
  blockCopy(c.out[0], c.in, size_t(c.instr->ints[0]), /*gather=*/true, ctx.stream);
}

void launchSplit(const CudaCall &c, CudaContext &ctx) {
  blockCopy(c.in[0], c.out, size_t(c.instr->ints[0]), /*gather=*/false, ctx.stream);
}

void launchEmbedding(const CudaCall &c, CudaContext &ctx) {
  const DevTensor &table = c.in[0], &ids = c.in[1];
  int64_t n = ids.numel(), vocab = table.shape()[0];
  int64_t rowBytes = table.shape()[1] * int64_t(dtypeSize(table.dtype()));
  if (n == 0 || rowBytes == 0) return;
  bool ids64 = ids.dtype() == DType::I64;
  // Move rows as 4-byte words when the row allows it (f32 tables always do).
  if (rowBytes % 4 == 0)
    embeddingKernel<<<gridFor(n * rowBytes / 4), kThreads, 0, ctx.stream>>>(
        table.as<uint32_t>(), ids.data, ids64, c.out[0].as<uint32_t>(), n, rowBytes / 4, vocab,
        ctx.error, c.index);
  else
    embeddingKernel<<<gridFor(n * rowBytes), kThreads, 0, ctx.stream>>>(
        table.as<uint8_t>(), ids.data, ids64, c.out[0].as<uint8_t>(), n, rowBytes, vocab,
        ctx.error, c.index);
}

void launchRotary(const CudaCall &c, CudaContext &ctx) { rotary(c, ctx, /*backward=*/false); }
void launchRotaryGrad(const CudaCall &c, CudaContext &ctx) { rotary(c, ctx, /*backward=*/true); }

} // namespace loom::rt::cuda

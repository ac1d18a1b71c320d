//===- EmbeddingGradKernels.cu - Deterministic segmented EmbeddingGrad ----===//
//
// Part of loom, under the Apache License v2.0.
//
// EmbeddingGrad, dtable[v, :] = sum over positions n with ids[n] == v of
// dy[n, :], must not add rows with float atomics (their order would change
// the bits from run to run). The positions are sorted by id with CUB's
// stable radix sort and the table is cleared; rows of ids that do not occur
// are the clear's zeros.
//
// Summing each run of equal ids in one block (the first version) left the
// step waiting on the longest run: real text is skewed (a byte corpus has
// ' ' at 1 position in 6), so one block read a sixth of dy alone (7.3 ms of
// the 8B-layer step). Instead the sorted positions are cut into segments of
// kSegment, and a block sums one segment's slice of kColumns columns:
//  - a run that lies inside the segment is summed there and written;
//  - a run that crosses a segment edge leaves one double partial per
//    segment it touches: the piece it starts with in its first segment's
//    `tail` slot, each later piece in that segment's `head` slot (a segment
//    holds at most one of each);
// then a second kernel, per segment that starts a crossing run, adds the
// run's partials in segment order and writes the row. Every sum has a fixed
// order (position order inside a segment, segment order across them), so
// the bits repeat from run to run; they can differ from the CPU reference's
// single position-order double sum only in the double's last bits, before
// the round to f32.
//
// With an addend (a tied LM head's weight gradient,
// loom-fuse-embedding-grad-accumulate) the table starts as the addend plus
// zero instead of zeros, and each summed row, rounded to f32, is added to
// what is there: the Add that followed, rounded once. Plus zero because a
// row no id picks was addend + 0, which turns -0 into +0; a summed row is
// never -0 (a double sum that starts at +0 cannot reach -0), so adding it
// to +0 or -0 gives the same bits, and an addend the table overwrites in
// place is read before it is written.
//===----------------------------------------------------------------------===//
#include "cuda/CudaCommon.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace loom::rt::cuda {
namespace {

/// Sorted positions per segment: enough work per block to hide the loads,
/// short enough that the longest run spreads over many SMs.
constexpr int kSegment = 64;
/// Columns per block (one per thread): coalesced 1 KiB row slices.
constexpr int kColumns = 256;

// Keys are ids (bad ones moved past the vocabulary, so no row reads them);
// values are positions. With `first` (VocabShardEmbeddingGrad) the keys
// are ids - first and ids outside the shard's rows are not errors, only
// rows of another rank.
__global__ void embeddingKeysKernel(const void *ids, bool ids64, const void *first, bool first64,
                                    int32_t *keys, int32_t *pos, int64_t N, int64_t V,
                                    DeviceError *err, int instr) {
  int64_t offset = first ? indexAt(first, first64, 0) : 0;
  LOOM_GRID_STRIDE(n, N) {
    int64_t id = indexAt(ids, ids64, n) - offset;
    if (id < 0 || id >= V) {
      if (!first)
        reportError(err, instr, 0, id, n, V);
      id = V;
    }
    keys[n] = int32_t(id);
    pos[n] = int32_t(n);
  }
}

/// The table before the rows are summed into it: the addend plus zero (see
/// the top of the file), eight elements a thread where the tensors allow.
__global__ void embeddingGradStartKernel(FloatIn addend, float *out, int64_t n, bool packed) {
  if (!packed) {
    LOOM_GRID_STRIDE(i, n) out[i] = addend[i] + 0.0f;
    return;
  }
  LOOM_PACK_STRIDE(i, n) {
    Pack p = load8(addend, i);
#pragma unroll
    for (int k = 0; k < kPack; ++k) p.v[k] += 0.0f;
    store8(FloatOut{out, false}, i, p);
  }
}

/// A summed row's element stored, or with `accumulate` added to the
/// addend the table starts as.
__device__ inline void storeRow(float *out, int64_t i, double acc, bool accumulate) {
  out[i] = accumulate ? out[i] + float(acc) : float(acc);
}

/// Block (segment, column slice): sums each piece of a run inside the
/// segment in position order; writes whole runs to `out` and crossing
/// pieces to their segment's head/tail partial slot.
__global__ void __launch_bounds__(kColumns)
    embeddingGradSegmentKernel(const float *__restrict__ dy, const int32_t *__restrict__ keys,
                               const int32_t *__restrict__ pos, float *__restrict__ out,
                               double *__restrict__ head, double *__restrict__ tail, int64_t N,
                               int64_t V, int64_t D, bool accumulate) {
  __shared__ int32_t sKey[kSegment + 2], sPos[kSegment];
  int64_t seg = blockIdx.x, s0 = seg * kSegment, s1 = min(N, s0 + kSegment);
  int len = int(s1 - s0);
  // sKey[0] is the key before the segment, sKey[len + 1] the one after it
  // (-1 past either end), so edges need no special case below.
  for (int i = threadIdx.x; i < len + 2; i += blockDim.x) {
    int64_t k = s0 - 1 + i;
    sKey[i] = k >= 0 && k < N ? keys[k] : -1;
  }
  for (int i = threadIdx.x; i < len; i += blockDim.x) sPos[i] = pos[s0 + i];
  __syncthreads();
  int64_t col = int64_t(blockIdx.y) * kColumns + threadIdx.x;
  if (col >= D) return;
  double acc = 0;
  int start = 0; // where the current piece began, in segment positions
#pragma unroll 8
  for (int i = 0; i < len; ++i) {
    acc += double(__ldg(dy + int64_t(sPos[i]) * D + col));
    int32_t v = sKey[i + 1];
    if (sKey[i + 2] == v && i + 1 < len) continue; // the piece goes on
    if (v < V) { // the run of bad ids (key V) has no row
      bool before = sKey[start] == v;         // the run began in an earlier segment
      bool after = i + 1 == len && sKey[i + 2] == v; // it goes on past the segment
      if (before) head[seg * D + col] = acc;
      else if (after) tail[seg * D + col] = acc;
      else storeRow(out, int64_t(v) * D + col, acc, accumulate);
    }
    acc = 0;
    start = i + 1;
  }
}

/// Block (segment, column slice): if a crossing run starts in `seg`, adds
/// its tail partial and the head partials of the segments it goes on into,
/// in segment order, and writes the row.
__global__ void __launch_bounds__(kColumns)
    embeddingGradJoinKernel(const int32_t *__restrict__ keys, float *__restrict__ out,
                            const double *__restrict__ head, const double *__restrict__ tail,
                            int64_t N, int64_t V, int64_t D, bool accumulate) {
  int64_t seg = blockIdx.x, s1 = min(N, (seg + 1) * kSegment);
  if (s1 >= N) return;
  int32_t v = keys[s1 - 1];
  if (keys[s1] != v || v >= V) return; // no run crosses this segment's end
  // Equal keys are contiguous, so if the key before the segment is v too,
  // the crossing run began earlier and that segment joins it.
  int64_t s0 = seg * kSegment;
  if (s0 > 0 && keys[s0 - 1] == v) return;
  int64_t col = int64_t(blockIdx.y) * kColumns + threadIdx.x;
  if (col >= D) return;
  double acc = tail[seg * D + col];
  for (int64_t g = seg + 1; g * kSegment < N; ++g) {
    acc += head[g * D + col];
    int64_t e = min(N, (g + 1) * kSegment);
    if (e >= N || keys[e] != v) break; // the run ends in segment g
  }
  storeRow(out, int64_t(v) * D + col, acc, accumulate);
}

/// Bits the radix sort must look at to order keys in [0, V] (V marks a bad
/// id).
int keyBits(int64_t V) {
  int bits = 1;
  while ((int64_t(1) << bits) <= V) ++bits;
  return bits;
}

size_t sortTempBytes(int64_t N, int64_t V) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t *>(nullptr),
                                  static_cast<int32_t *>(nullptr),
                                  static_cast<const int32_t *>(nullptr),
                                  static_cast<int32_t *>(nullptr), int(N), 0, keyBits(V));
  return bytes;
}

int64_t segmentsOf(int64_t N) { return (N + kSegment - 1) / kSegment; }

/// EmbeddingGrad, or with `first` the rows [first, first + V) of one
/// vocabulary shard (VocabShardEmbeddingGrad). EmbeddingGrad's optional
/// third input is the addend.
void embeddingGrad(const CudaCall &c, CudaContext &ctx, const DevTensor *first) {
  const DevTensor &dy = c.in[0], &ids = c.in[1];
  const DevTensor *addend = !first && c.in.size() > 2 ? &c.in[2] : nullptr;
  int64_t N = ids.numel(), V = c.out[0].shape()[0], D = c.out[0].shape()[1];
  if (V == 0 || D == 0) return;
  if (addend) {
    int64_t n = V * D;
    bool packed = packable(n, {addend, &c.out[0]});
    embeddingGradStartKernel<<<packed ? packGrid(n) : gridFor(n), kThreads, 0, ctx.stream>>>(
        floatIn(*addend), c.out[0].as<float>(), n, packed);
  } else {
    cudaMemsetAsync(c.out[0].data, 0, c.out[0].desc->bytes, ctx.stream);
  }
  if (N == 0) return;
  auto *base = static_cast<uint8_t *>(ctx.scratch);
  size_t slot = align256(size_t(N) * 4), partials = align256(size_t(segmentsOf(N) * D) * 8);
  auto *keys = reinterpret_cast<int32_t *>(base), *pos = reinterpret_cast<int32_t *>(base + slot);
  auto *sortedKeys = reinterpret_cast<int32_t *>(base + 2 * slot);
  auto *sortedPos = reinterpret_cast<int32_t *>(base + 3 * slot);
  auto *head = reinterpret_cast<double *>(base + 4 * slot);
  auto *tail = reinterpret_cast<double *>(base + 4 * slot + partials);
  void *temp = base + 4 * slot + 2 * partials;
  size_t tempBytes = sortTempBytes(N, V);
  embeddingKeysKernel<<<gridFor(N), kThreads, 0, ctx.stream>>>(
      ids.data, ids.dtype() == DType::I64, first ? first->data : nullptr,
      first && first->dtype() == DType::I64, keys, pos, N, V, ctx.error, c.index);
  cub::DeviceRadixSort::SortPairs(temp, tempBytes, keys, sortedKeys, pos, sortedPos, int(N), 0,
                                  keyBits(V), ctx.stream);
  dim3 grid(unsigned(segmentsOf(N)), unsigned((D + kColumns - 1) / kColumns));
  embeddingGradSegmentKernel<<<grid, kColumns, 0, ctx.stream>>>(
      dy.as<float>(), sortedKeys, sortedPos, c.out[0].as<float>(), head, tail, N, V, D,
      addend != nullptr);
  embeddingGradJoinKernel<<<grid, kColumns, 0, ctx.stream>>>(
      sortedKeys, c.out[0].as<float>(), head, tail, N, V, D, addend != nullptr);
}

} // namespace

size_t embeddingGradScratchBytes(const Program &p, const Instr &I) {
  if (I.op != OpCode::EmbeddingGrad && I.op != OpCode::VocabShardEmbeddingGrad) return 0;
  int64_t N = p.buffers[I.in[1]].numElements(), V = p.buffers[I.out[0]].shape[0],
          D = p.buffers[I.out[0]].shape[1];
  return 4 * align256(size_t(N) * 4) + 2 * align256(size_t(segmentsOf(N) * D) * 8) +
         sortTempBytes(N, V);
}

void launchEmbeddingGrad(const CudaCall &c, CudaContext &ctx) { embeddingGrad(c, ctx, nullptr); }

void launchVocabShardEmbeddingGrad(const CudaCall &c, CudaContext &ctx) {
  embeddingGrad(c, ctx, &c.in[2]);
}

} // namespace loom::rt::cuda

//===- MatMulKernel.cpp - Batched matrix product --------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// out[b] = op(A[b]) op(B[b]) for every index b of the broadcast batch shape,
// where op transposes the last two dims when its flag is set:
//   out[b, i, j] = sum_k opA[b, i, k] * opB[b, k, j],  i < M, j < N, k < K.
// A weight shared by all batches (B of rank 2, A untransposed and not
// broadcast) turns the batch into extra rows: one [batch*M, K] x [K, N]
// product, the shape of every linear layer.
//
// With LOOM_HAVE_CBLAS each product is cblas_sgemm calls on fixed row blocks,
// one OpenBLAS thread each, spread over the pool. Without it, a
// cache-blocked kernel: the output is cut into MC x NC tiles spread over the
// pool; for each KC-deep slab a tile packs its slice of A (MC x KC, 64 KiB)
// and of B (KC x NC, 128 KiB) contiguously, and a 4 x 8 register-tile
// micro-kernel accumulates in float. Summing in KC-sized partial blocks keeps
// the rounding error near sqrt(K) * 2^-24 relative to sum |a||b|.
//
// f64 operands (the compiler's gradient checks, not training) take a plain
// row-by-row loop that accumulates in double.
//
// An optional bias[N] (addmm) is added to every row of the accumulator in
// its precision, and the sum is what gets stored (rounded once for a bf16
// result): the same bits as the product, an Add and a Cast in turn. A third
// input of the result's shape is an addend instead (a GEMM with beta = 1):
// added element by element to the f32 or f64 accumulator, the same bits as
// the product followed by an Add.
//===----------------------------------------------------------------------===//
#include "cpu/Bf16.h"
#include "cpu/Kernels.h"
#include "cpu/Strided.h"

#include <algorithm>
#include <atomic>

#ifdef LOOM_HAVE_CBLAS
#include <cblas.h>
#endif

namespace loom::rt {
namespace {

/// One matrix operand: element (r, c) of op(X) is at p[r * rs + c * cs].
struct MatrixView {
  const float *p;
  int64_t rs, cs;
  float at(int64_t r, int64_t c) const { return p[r * rs + c * cs]; }
};

/// Strides of op(X) for a row-major matrix whose stored row length is `ld`.
MatrixView view(const float *p, int64_t ld, bool transposed) {
  return transposed ? MatrixView{p, 1, ld} : MatrixView{p, ld, 1};
}

struct Gemm {
  MatrixView a, b; // op(A) is M x K, op(B) is K x N
  float *c;        // M x N, row-major
  int64_t m, n, k;
  bool ta, tb;     // for cblas: the stored layout of A and B
  int64_t lda, ldb;
};

#ifndef LOOM_HAVE_CBLAS
constexpr int64_t kMC = 64, kNC = 128, kKC = 256; // cache tile sizes
constexpr int64_t kMR = 4, kNR = 8;               // register tile

/// c[0..kMR)[0..kNR) (+)= ap[kMR x kc] * bp[kc x kNR], where `ap` holds kMR
/// values per k and `bp` kNR values per k, both zero-padded. One
/// accumulator row per output row keeps the inner j loop a plain
/// multiply-add over contiguous floats, which compilers keep in vector
/// registers; with 4 x 8 the accumulators fit even the 16 SSE registers.
void microKernel(const float *ap, const float *bp, int64_t kc, float *c, int64_t ldc,
                 int64_t rows, int64_t cols, bool accumulate) {
  float c0[kNR] = {}, c1[kNR] = {}, c2[kNR] = {}, c3[kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float *b = bp + p * kNR;
    float a0 = ap[p * kMR], a1 = ap[p * kMR + 1], a2 = ap[p * kMR + 2], a3 = ap[p * kMR + 3];
    for (int64_t j = 0; j < kNR; ++j) {
      c0[j] += a0 * b[j];
      c1[j] += a1 * b[j];
      c2[j] += a2 * b[j];
      c3[j] += a3 * b[j];
    }
  }
  const float *acc[kMR] = {c0, c1, c2, c3};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      c[r * ldc + j] = accumulate ? c[r * ldc + j] + acc[r][j] : acc[r][j];
}

/// Computes tile rows [i0, i0 + mc) x cols [j0, j0 + nc) of one product.
/// `apack` and `bpack` are this thread's packing buffers.
void gemmTile(const Gemm &g, int64_t i0, int64_t j0, std::vector<float> &apack,
              std::vector<float> &bpack) {
  int64_t mc = std::min(kMC, g.m - i0), nc = std::min(kNC, g.n - j0);
  for (int64_t p0 = 0; p0 < g.k; p0 += kKC) {
    int64_t kc = std::min(kKC, g.k - p0);
    // Pack A as row panels of kMR rows: panel r holds, for each p, kMR values.
    for (int64_t ip = 0; ip < mc; ip += kMR)
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t r = 0; r < kMR; ++r)
          apack[ip * kc + p * kMR + r] = ip + r < mc ? g.a.at(i0 + ip + r, p0 + p) : 0.0f;
    // Pack B as column panels of kNR columns: for each p, kNR values.
    for (int64_t jp = 0; jp < nc; jp += kNR)
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t j = 0; j < kNR; ++j)
          bpack[jp * kc + p * kNR + j] = jp + j < nc ? g.b.at(p0 + p, j0 + jp + j) : 0.0f;
    for (int64_t ip = 0; ip < mc; ip += kMR)
      for (int64_t jp = 0; jp < nc; jp += kNR)
        microKernel(&apack[ip * kc], &bpack[jp * kc], kc, g.c + (i0 + ip) * g.n + j0 + jp, g.n,
                    std::min(kMR, mc - ip), std::min(kNR, nc - jp), p0 > 0);
  }
}

/// Runs every tile of every product, tiles spread over the pool.
void runGemms(const std::vector<Gemm> &gemms, ThreadPool &pool) {
  const Gemm &g0 = gemms[0];
  int64_t tm = (g0.m + kMC - 1) / kMC, tn = (g0.n + kNC - 1) / kNC;
  int64_t tiles = tm * tn;
  pool.parallelFor(int64_t(gemms.size()) * tiles, 1, [&](int64_t begin, int64_t end) {
    // Panels are padded to whole register tiles.
    std::vector<float> apack((kMC + kMR) * kKC), bpack((kNC + kNR) * kKC);
    for (int64_t t = begin; t < end; ++t) {
      const Gemm &g = gemms[size_t(t / tiles)];
      int64_t tile = t % tiles;
      gemmTile(g, (tile / tn) * kMC, (tile % tn) * kNC, apack, bpack);
    }
  });
}
#else
} // namespace
} // namespace loom::rt

// OpenBLAS's own setter, where the BLAS is OpenBLAS (weak: other BLAS
// libraries lack it, and their threads are theirs to configure).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace loom::rt {
namespace {

/// OpenBLAS starts a thread per core in every process and spins them
/// between products, so N ranks of one host (--nproc) would run N x cores
/// busy threads. And a product it threads itself may round differently
/// with another thread count (seen with OPENBLAS_CORETYPE=Haswell on an
/// AVX-512 EPYC: 1 and 4 threads gave other bits), while a run must not
/// depend on --threads. So OpenBLAS runs one thread per call, and the
/// pool runs the calls: each product's rows in blocks whose size depends
/// on the product alone, never on the pool.
void useOneBlasThread() {
  static std::atomic<bool> done{false};
  if (openblas_set_num_threads && !done.exchange(true))
    openblas_set_num_threads(1);
}

/// Rows per block: about 2^22 multiply-adds, at least 16 rows (a fixed
/// function of the shape, so the blocks, and each element's sum, are the
/// same for every thread count).
int64_t rowsPerBlock(const Gemm &g) {
  int64_t perRow = std::max<int64_t>(1, g.n * g.k);
  return std::min(g.m, std::max<int64_t>(16, (int64_t(1) << 22) / perRow));
}

void runGemms(const std::vector<Gemm> &gemms, ThreadPool &pool) {
  useOneBlasThread();
  auto rows = [](const Gemm &g, int64_t r0, int64_t r1) {
    // op(A)'s rows r0..r1: stored A's rows, or its columns when transposed.
    const float *a = g.ta ? g.a.p + r0 : g.a.p + r0 * g.lda;
    cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                int(r1 - r0), int(g.n), int(g.k), 1.0f, a, int(g.lda), g.b.p, int(g.ldb), 0.0f,
                g.c + r0 * g.n, int(g.n));
  };
  // Tasks: (product, first row) over every product's row blocks.
  std::vector<std::pair<size_t, int64_t>> tasks;
  for (size_t i = 0; i < gemms.size(); ++i) // (m, n, k > 0: matMulF32 returned earlier)
    for (int64_t r = 0, step = rowsPerBlock(gemms[i]); r < gemms[i].m; r += step)
      tasks.emplace_back(i, r);
  pool.parallelFor(int64_t(tasks.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const Gemm &g = gemms[tasks[size_t(t)].first];
      int64_t r0 = tasks[size_t(t)].second;
      rows(g, r0, std::min(g.m, r0 + rowsPerBlock(g)));
    }
  });
}
#endif

/// f64 products (the precision of gradient checks, not of training): one
/// output row per task, a plain i-k-j loop accumulating in double.
void matMulF64(const KernelCall &c, ThreadPool &pool) {
  const Tensor &A = c.in[0], &B = c.in[1], &C = c.out[0];
  bool ta = c.instr->ints[0] != 0, tb = c.instr->ints[1] != 0;
  const Shape &as = A.shape(), &bs = B.shape(), &cs = C.shape();
  size_t ra = as.size(), rb = bs.size(), rc = cs.size();
  int64_t m = cs[rc - 2], n = cs[rc - 1], k = ta ? as[ra - 2] : as[ra - 1];
  int64_t lda = as[ra - 1], ldb = bs[rb - 1];
  Shape batch(cs.begin(), cs.end() - 2);
  Shape aStrides = broadcastStrides(Shape(as.begin(), as.end() - 2), batch);
  Shape bStrides = broadcastStrides(Shape(bs.begin(), bs.end() - 2), batch);
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;
  pool.parallelFor(batches * m, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * k)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t bi = row / m, i = row % m;
      const double *a = A.as<double>() + offsetOf(bi, batch, aStrides) * m * k;
      const double *b = B.as<double>() + offsetOf(bi, batch, bStrides) * k * n;
      double *out = C.as<double>() + row * n;
      std::fill(out, out + n, 0.0);
      for (int64_t p = 0; p < k; ++p) {
        double x = ta ? a[p * lda + i] : a[i * lda + p];
        for (int64_t j = 0; j < n; ++j) out[j] += x * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      }
    }
  });
}


/// bf16 operands (autocast's matmuls): the operands widen to f32 exactly,
/// the product accumulates in f32 like a bf16 GEMM's accumulator, and a
/// bf16 result is rounded once (an f32 result is the accumulator). The widened copies are the one
/// allocation this kernel makes per call; the CPU backend is the reference,
/// not the fast path.
/// out[r, j] += third(r, j) over an accumulator holding `rows` rows of n,
/// the sum rounded to T (exactly what an Add kernel stores).
template <typename T, typename B>
void addThird(T *out, const B &third, int64_t rows, int64_t n, ThreadPool &pool) {
  pool.parallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t j = 0; j < n; ++j) out[r * n + j] = T(double(out[r * n + j]) + third(r, j));
  });
}

/// Adds MatMul's third input, if any, to the accumulator `out` (of T, the
/// result's dtype or f32 under a bf16 result): a bias vector over the last
/// dim, or an addend of the result's shape.
template <typename T>
void addThirdInput(const KernelCall &c, T *out, ThreadPool &pool) {
  if (c.in.size() != 3)
    return;
  const Tensor &x = c.in[2];
  int64_t n = c.out[0].shape().back(), rows = c.out[0].numel() / std::max<int64_t>(1, n);
  bool addend = isMatMulAddend(x.shape());
  auto at = [&](int64_t r, int64_t j) { return addend ? r * n + j : j; };
  switch (x.dtype()) {
  case DType::BF16:
    addThird(out, [&](int64_t r, int64_t j) { return double(bf16ToFloat(x.as<uint16_t>()[at(r, j)])); },
             rows, n, pool);
    break;
  case DType::F64:
    addThird(out, [&](int64_t r, int64_t j) { return x.as<double>()[at(r, j)]; }, rows, n, pool);
    break;
  default:
    addThird(out, [&](int64_t r, int64_t j) { return double(x.as<float>()[at(r, j)]); }, rows, n,
             pool);
  }
}

/// MatMul's second output (matMulSumsB): the column sums of B (`b`, the
/// operand widened to f32), by the Reduce they replace (sum over rows, f32)
/// and then Cast's rounding to bf16, so folding them changes no bits here.
bool storeColumnSums(const KernelCall &c, const float *b, ThreadPool &pool, std::string &err) {
  const int64_t n = c.in[1].shape()[1];
  BufferDesc wide = *c.in[1].desc, sumsDesc;
  wide.dtype = DType::F32;
  sumsDesc.dtype = DType::F32;
  sumsDesc.shape = {1, n};
  std::vector<float> sums(static_cast<size_t>(n));
  const Instr reduce{OpCode::Reduce, {}, {}, {0, 0}, {}}; // sum over axis 0
  KernelCall call{&reduce, {Tensor{const_cast<float *>(b), &wide}}, {Tensor{sums.data(), &sumsDesc}}};
  if (!runReduce(call, pool, err))
    return false;
  uint16_t *out = c.out[1].as<uint16_t>();
  for (int64_t j = 0; j < n; ++j) out[j] = floatToBf16(sums[size_t(j)]);
  return true;
}

bool matMulBf16(const KernelCall &c, ThreadPool &pool, std::string &err) {
  bool f32Out = c.out[0].dtype() == DType::F32; // the accumulator, unrounded
  std::vector<float> a(size_t(c.in[0].numel())), b(size_t(c.in[1].numel()));
  std::vector<float> y(f32Out ? 0 : size_t(c.out[0].numel()));
  const uint16_t *pa = c.in[0].as<uint16_t>(), *pb = c.in[1].as<uint16_t>();
  for (size_t i = 0; i < a.size(); ++i) a[i] = bf16ToFloat(pa[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = bf16ToFloat(pb[i]);
  BufferDesc da = *c.in[0].desc, db = *c.in[1].desc, dy = *c.out[0].desc;
  da.dtype = db.dtype = dy.dtype = DType::F32;
  float *acc = f32Out ? c.out[0].as<float>() : y.data();
  KernelCall wide{c.instr, {Tensor{a.data(), &da}, Tensor{b.data(), &db}}, {Tensor{acc, &dy}}};
  if (!runMatMul(wide, pool, err))
    return false;
  addThirdInput(c, acc, pool);
  if (matMulSumsB(*c.instr) && !storeColumnSums(c, b.data(), pool, err))
    return false;
  if (f32Out)
    return true;
  uint16_t *out = c.out[0].as<uint16_t>();
  for (size_t i = 0; i < y.size(); ++i) out[i] = floatToBf16(y[i]);
  return true;
}

} // namespace

bool runMatMul(const KernelCall &c, ThreadPool &pool, std::string &err) {
  if (c.in[0].dtype() == DType::BF16)
    return matMulBf16(c, pool, err);
  if (c.out[0].dtype() == DType::F64) {
    matMulF64(c, pool);
    addThirdInput(c, c.out[0].as<double>(), pool);
    return true;
  }
  const Tensor &A = c.in[0], &B = c.in[1], &C = c.out[0];
  bool ta = c.instr->ints[0] != 0, tb = c.instr->ints[1] != 0;
  const Shape &as = A.shape(), &bs = B.shape(), &cs = C.shape();
  size_t ra = as.size(), rb = bs.size(), rc = cs.size();
  int64_t m = cs[rc - 2], n = cs[rc - 1];
  int64_t k = ta ? as[ra - 2] : as[ra - 1];
  int64_t lda = as[ra - 1], ldb = bs[rb - 1];
  if (m == 0 || n == 0)
    return true;
  auto withBias = [&] {
    addThirdInput(c, C.as<float>(), pool);
    return true;
  };
  if (k == 0) { // an empty sum; BLAS rejects the zero leading dimensions
    std::fill(C.as<float>(), C.as<float>() + C.numel(), 0.0f);
    return withBias();
  }

  Shape batch(cs.begin(), cs.end() - 2);
  Shape aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  Shape aStrides = broadcastStrides(aBatch, batch), bStrides = broadcastStrides(bBatch, batch);
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;
  bool bShared = std::all_of(bStrides.begin(), bStrides.end(), [](int64_t s) { return s == 0; });
  bool aFull = aBatch == batch;

  std::vector<Gemm> gemms;
  if (bShared && aFull && !ta) {
    gemms.push_back({view(A.as<float>(), lda, false), view(B.as<float>(), ldb, tb), C.as<float>(),
                     batches * m, n, k, false, tb, lda, ldb});
  } else {
    for (int64_t i = 0; i < batches; ++i) {
      const float *a = A.as<float>() + offsetOf(i, batch, aStrides) * m * k;
      const float *b = B.as<float>() + offsetOf(i, batch, bStrides) * k * n;
      gemms.push_back({view(a, lda, ta), view(b, ldb, tb), C.as<float>() + i * m * n, m, n, k, ta,
                       tb, lda, ldb});
    }
  }
  runGemms(gemms, pool);
  return withBias();
}

} // namespace loom::rt

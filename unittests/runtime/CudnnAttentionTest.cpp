//===- CudnnAttentionTest.cpp - cuDNN's attention against a double reference ===//
//
// Part of loom, under the Apache License v2.0.
//
// The cuDNN graphs of CudnnAttention.cpp (forward: o and lse; backward: dq,
// dk, dv from o and lse) on fresh random bf16 inputs, against causal
// grouped-query attention evaluated on the host in double from the same
// bf16 values. Outputs are poisoned with NaN before each launch. Skipped
// without a GPU, and (reported as skipped, not passed) where the machine's
// cuDNN is missing or refuses the graph.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"

#include <gtest/gtest.h>

#ifdef LOOM_HAVE_CUDA
#include "cpu/Bf16.h"
#include "cuda/CudnnAttention.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace loom::rt {
namespace {

using cuda::CudnnAttention;
using cuda::SdpaShape;

/// A device buffer of bf16 values or f32 values.
struct DeviceBuf {
  void *p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuf(size_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~DeviceBuf() { cudaFree(p); }
  void poison() { cudaMemset(p, 0xff, bytes); } // NaN as bf16 and as f32
};

void upload(DeviceBuf &d, const std::vector<float> &v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = floatToBf16(v[i]);
  ASSERT_EQ(cudaMemcpy(d.p, h.data(), h.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
}

std::vector<double> downloadBf16(const DeviceBuf &d) {
  std::vector<uint16_t> h(d.bytes / 2);
  EXPECT_EQ(cudaMemcpy(h.data(), d.p, d.bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<double> r(h.size());
  for (size_t i = 0; i < h.size(); ++i) r[i] = bf16ToFloat(h[i]);
  return r;
}

std::vector<double> downloadF32(const DeviceBuf &d) {
  std::vector<float> h(d.bytes / 4);
  EXPECT_EQ(cudaMemcpy(h.data(), d.p, d.bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return std::vector<double>(h.begin(), h.end());
}

/// bf16 values drawn uniformly from [-a, a].
std::vector<float> randomBf16(size_t n, float a, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-a, a);
  std::vector<float> v(n);
  for (float &x : v) x = bf16ToFloat(floatToBf16(dist(rng)));
  return v;
}

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

/// Causal GQA attention and its gradients in double.
Reference reference(const SdpaShape &a, const std::vector<float> &q, const std::vector<float> &k,
                    const std::vector<float> &v, const std::vector<float> &dy) {
  const int64_t B = a.B, H = a.Hq, G = a.Hkv, T = a.T, D = a.D, group = H / G;
  Reference r;
  r.o.assign(size_t(B * H * T * D), 0);
  r.lse.assign(size_t(B * H * T), 0);
  r.dq.assign(r.o.size(), 0);
  r.dk.assign(size_t(B * G * T * D), 0);
  r.dv.assign(r.dk.size(), 0);
  const size_t n = static_cast<size_t>(T);
  std::vector<double> s(n), p(n);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t g = b * G + h / group, qh = b * H + h;
      for (int64_t i = 0; i < T; ++i) {
        const float *qi = &q[size_t((qh * T + i) * D)];
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const float *kj = &k[size_t((g * T + j) * D)];
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(qi[d]) * kj[d];
          s[size_t(j)] = dot * a.scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[size_t(j)] - mx);
        double lse = mx + std::log(sum);
        r.lse[size_t(qh * T + i)] = lse;
        double *oi = &r.o[size_t((qh * T + i) * D)];
        for (int64_t j = 0; j <= i; ++j) {
          p[size_t(j)] = std::exp(s[size_t(j)] - lse);
          for (int64_t d = 0; d < D; ++d) oi[d] += p[size_t(j)] * v[size_t((g * T + j) * D + d)];
        }
        const float *dyi = &dy[size_t((qh * T + i) * D)];
        double delta = 0;
        for (int64_t d = 0; d < D; ++d) delta += double(dyi[d]) * oi[d];
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(dyi[d]) * v[size_t((g * T + j) * D + d)];
          double ds = p[size_t(j)] * (dot - delta) * a.scale;
          for (int64_t d = 0; d < D; ++d) {
            r.dq[size_t((qh * T + i) * D + d)] += ds * k[size_t((g * T + j) * D + d)];
            r.dk[size_t((g * T + j) * D + d)] += ds * qi[d];
            r.dv[size_t((g * T + j) * D + d)] += p[size_t(j)] * dyi[d];
          }
        }
      }
    }
  return r;
}

/// max |got - want| / (max |want| + tiny), NaN when any value is not finite.
double relMaxError(const std::vector<double> &got, const std::vector<double> &want) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i]))
      return NAN;
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

void checkShape(CudnnAttention &cudnn, const SdpaShape &a, unsigned seed) {
  SCOPED_TRACE(testing::Message() << "B=" << a.B << " Hq=" << a.Hq << " Hkv=" << a.Hkv
                                  << " T=" << a.T << " D=" << a.D);
  size_t fwdWs = 0, bwdWs = 0;
  std::string why;
  int fwd = cudnn.plan(a, false, fwdWs, why);
  if (fwd < 0)
    GTEST_SKIP() << "cuDNN " << cudnn.version() << " refuses the forward: " << why;
  int bwd = cudnn.plan(a, true, bwdWs, why);
  if (bwd < 0)
    GTEST_SKIP() << "cuDNN " << cudnn.version() << " refuses the backward: " << why;

  std::mt19937 rng(seed ^ std::random_device{}());
  size_t nq = size_t(a.B * a.Hq * a.T * a.D), nk = size_t(a.B * a.Hkv * a.T * a.D);
  auto q = randomBf16(nq, 2.f, rng), k = randomBf16(nk, 2.f, rng), v = randomBf16(nk, 1.f, rng),
       dy = randomBf16(nq, 1.f, rng);
  Reference want = reference(a, q, k, v, dy);

  DeviceBuf qBuf(nq * 2), kBuf(nk * 2), vBuf(nk * 2), dO(nq * 2), o(nq * 2),
      lse(size_t(a.B * a.Hq * a.T) * 4), gq(nq * 2), gk(nk * 2), gv(nk * 2),
      ws(std::max<size_t>({fwdWs, bwdWs, 256}));
  upload(qBuf, q);
  upload(kBuf, k);
  upload(vBuf, v);
  upload(dO, dy);
  o.poison();
  lse.poison();
  std::string err;
  ASSERT_TRUE(cudnn.forward(fwd, qBuf.p, kBuf.p, vBuf.p, o.p, static_cast<float *>(lse.p), ws.p,
                            nullptr, err))
      << err;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // bf16 outputs of bf16 products accumulated in f32: a few bf16 ulps.
  EXPECT_LT(relMaxError(downloadBf16(o), want.o), 2e-2);
  EXPECT_LT(relMaxError(downloadF32(lse), want.lse), 1e-4);

  // The backward reads the forward's own o and lse, as the program does.
  for (DeviceBuf *b : {&gq, &gk, &gv}) b->poison();
  ASSERT_TRUE(cudnn.backward(bwd, qBuf.p, kBuf.p, vBuf.p, o.p, static_cast<const float *>(lse.p),
                             dO.p, gq.p, gk.p, gv.p, ws.p, nullptr, err))
      << err;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LT(relMaxError(downloadBf16(gq), want.dq), 3e-2);
  EXPECT_LT(relMaxError(downloadBf16(gk), want.dk), 3e-2);
  EXPECT_LT(relMaxError(downloadBf16(gv), want.dv), 3e-2);
}

TEST(CudnnAttention, MatchesDoubleReferenceWithGroupedHeads) {
  REQUIRE_GPU();
  std::string why;
  auto cudnn = CudnnAttention::create(why);
  if (!cudnn)
    GTEST_SKIP() << why;
  checkShape(*cudnn, {2, 4, 2, 128, 64, 0.125f}, 1);  // groups of two query heads
  checkShape(*cudnn, {1, 2, 2, 192, 64, 0.125f}, 2);  // one query head per kv head
  checkShape(*cudnn, {1, 4, 1, 100, 128, 0.0884f}, 3); // T not a tile multiple, D 128
}

} // namespace
} // namespace loom::rt

#else

TEST(CudnnAttention, MatchesDoubleReferenceWithGroupedHeads) {
  GTEST_SKIP() << "built without the CUDA backend";
}

#endif

// The cross-entropy gradient kernel as it was before 2026-11-29's twelfth session (from
// git, renamed into namespace loom_old) for ce_bench.cu's baseline. See ce_bench.cu.
#define loom loom_old
#include CE_OLD_SOURCE
namespace loom::rt::cuda {
size_t embeddingGradScratchBytes(const Program &, const Instr &) { return 0; }
} // namespace loom::rt::cuda
#undef loom

void oldCrossEntropyGrad(const void *x, const void *targets, const float *dloss, void *dx,
                         double *rowLoss, int64_t N, int64_t V, bool packed, void *err) {
  using namespace loom_old::rt::cuda;
  crossEntropyGradKernel<<<unsigned(N), kLossThreads>>>(
      FloatIn{x, true}, targets, true, dloss, FloatOut{dx, true}, rowLoss, N, V, packed,
      static_cast<loom_old::rt::cuda::DeviceError *>(err), 0);
}

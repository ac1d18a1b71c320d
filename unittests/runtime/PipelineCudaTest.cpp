//===- PipelineCudaTest.cpp - What pipeline ranks need on one GPU ---------===//
//
// Part of loom, under the Apache License v2.0.
//
// The pieces a pipeline plan's ranks use on the CUDA backend, each against
// its CPU counterpart or a known answer:
//  - grouped send/recv ordered by streams alone (enqueueSendRecv): the
//    receiver sees what the sender's stream wrote before the transfer,
//    and later work on its own stream sees the received bytes, with no
//    host synchronisation in between;
//  - several programs with collectives on one rank (a stage's forward,
//    backward and optimizer executors share the rank's communicator): run
//    interleaved, each keeps its own collectives and matches the CPU's
//    in-process ranks bit for bit;
//  - device PipelineBuffers: zeroed, counted while live, and an executor
//    reads inputs from and writes outputs to them device to device.
// Skipped without a GPU.
//===----------------------------------------------------------------------===//
#include "GpuTestUtil.h"
#include "RuntimeTestUtil.h"
#include "loom/runtime/InProcessCommunicator.h"
#include "loom/runtime/PipelineBuffers.h"
#ifdef LOOM_HAVE_CUDA
#include "cuda/StreamCommunicator.h"
#include "loom/runtime/DeviceMemoryCommunicator.h"
#include <cuda_runtime.h>
#endif

#include <thread>

using namespace loom::rt;
using namespace loom::rt::test;

namespace {

/// Runs fn(r) for every rank on its own thread.
void onRanks(int world, const std::function<void(int)> &fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(fn, r);
  for (std::thread &t : threads) t.join();
}

TEST(PipelineCuda, SendRecvOrderedByStreamsAlone) {
  REQUIRE_GPU();
#ifdef LOOM_HAVE_CUDA
  std::string err;
  auto world = createDeviceMemoryCommunicator(2, err);
  ASSERT_TRUE(world) << err;
  auto *comm = dynamic_cast<cuda::StreamCommunicator *>(world.get());
  ASSERT_TRUE(comm);
  // Large enough that the sender's memset is still running when the
  // transfer is posted, so a copy not ordered after it reads stale bytes.
  const size_t n = size_t(64) << 20;
  std::vector<std::string> errs(2);
  std::vector<unsigned char> got(n);
  for (int round = 0; round < 3; ++round) {
    unsigned char value = static_cast<unsigned char>(0x11 * (round + 1));
    onRanks(2, [&](int r) {
      std::string &e = errs[size_t(r)];
      cudaStream_t s = nullptr;
      void *buf = nullptr;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
          cudaMalloc(&buf, n) != cudaSuccess) {
        e = "cannot set up the rank's stream and buffer";
        return;
      }
      if (r == 0) {
        cudaMemsetAsync(buf, value, n, s);
        comm->enqueueSendRecv(0, {P2POp::sendTo(1, buf, n)}, s, e);
        // The send's bytes may be reused once the stream passes it.
        cudaMemsetAsync(buf, 0, n, s);
      } else {
        cudaMemsetAsync(buf, 0xee, n, s);
        if (comm->enqueueSendRecv(1, {P2POp::recvFrom(0, buf, n)}, s, e))
          cudaMemcpyAsync(got.data(), buf, n, cudaMemcpyDeviceToHost, s);
      }
      if (e.empty() && cudaStreamSynchronize(s) != cudaSuccess)
        e = "the stream failed";
      cudaFree(buf);
      cudaStreamDestroy(s);
    });
    ASSERT_EQ(errs[0], "");
    ASSERT_EQ(errs[1], "");
    size_t wrong = 0;
    for (unsigned char c : got) wrong += c != value;
    EXPECT_EQ(wrong, 0u) << "round " << round;
  }
#endif
}

/// Program A: an all-reduce (sum) of x; program B: a mean all-reduce of
/// x, then an all-gather of it along an inner dim (through staging).
Program programA() {
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {3, 37}, "x");
  uint32_t y = b.output(DType::F32, {3, 37}, "y");
  b.instr(OpCode::AllReduce, {x}, {y}, {0, -1, 1, 1, 2, 1, 1, 1 << 2});
  return b.p;
}
Program programB() {
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {2, 5}, "x");
  uint32_t m = b.temp(DType::F32, {2, 5});
  uint32_t y = b.output(DType::F32, {2, 10}, "y");
  b.instr(OpCode::AllReduce, {x}, {m}, {1, -1, 1, 1, 2, 1, 1, 1 << 2});
  b.instr(OpCode::AllGather, {m}, {y}, {0, 1, 1, 1, 2, 1, 1, 1 << 2});
  return b.p;
}

/// Two ranks, each with executors of A and B on one communicator, running
/// A B A B with fresh inputs each time; every output in run order.
std::vector<std::vector<float>> runInterleaved(const std::string &backend, Communicator &comm,
                                               const std::vector<std::vector<float>> &inputs) {
  std::vector<std::vector<float>> outs(2);
  std::vector<std::string> errs(2);
  auto a = std::make_shared<Program>(programA()), b = std::make_shared<Program>(programB());
  onRanks(2, [&](int r) {
    std::string &e = errs[size_t(r)];
    auto ea = createRankExecutor(a, backend, 1, &comm, r, e);
    auto eb = ea ? createRankExecutor(b, backend, 1, &comm, r, e) : nullptr;
    if (!eb) {
      comm.abort(e);
      return;
    }
    for (int k = 0; k < 4; ++k) {
      Executor &ex = k % 2 ? *eb : *ea;
      const Program &p = ex.program();
      const std::vector<float> &in = inputs[size_t(r * 4 + k)];
      std::vector<float> out(size_t(p.buffers[p.outputs[0]].numElements()));
      if (!ex.setInput(0, in.data(), p.buffers[p.inputs[0]].bytes, e) || !ex.run(e) ||
          !ex.getOutput(0, out.data(), out.size() * 4, e)) {
        comm.abort(e);
        return;
      }
      outs[size_t(r)].insert(outs[size_t(r)].end(), out.begin(), out.end());
    }
  });
  EXPECT_EQ(errs[0], "") << backend;
  EXPECT_EQ(errs[1], "") << backend;
  return outs;
}

TEST(PipelineCuda, ProgramsSharingARankKeepTheirCollectives) {
  REQUIRE_GPU();
#ifdef LOOM_HAVE_CUDA
  Rng rng;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 4; ++k) inputs.push_back(rng.uniform(k % 2 ? 10 : 3 * 37));
  InProcessCommunicator cpuComm(2);
  std::string err;
  auto gpuComm = createDeviceMemoryCommunicator(2, err);
  ASSERT_TRUE(gpuComm) << err;
  auto cpu = runInterleaved("cpu", cpuComm, inputs);
  auto gpu = runInterleaved("cuda", *gpuComm, inputs);
  ASSERT_EQ(cpu[0].size(), size_t(2 * (3 * 37 + 20)));
  EXPECT_EQ(cpu, gpu);
#endif
}

TEST(PipelineCuda, DeviceBuffersFeedTheExecutorDeviceToDevice) {
  REQUIRE_GPU();
#ifdef LOOM_HAVE_CUDA
  std::string err;
  auto mem = createPipelineBuffers("cuda", err);
  ASSERT_TRUE(mem) << err;
  ProgramBuilder b;
  uint32_t x = b.input(DType::F32, {4, 33}, "x");
  uint32_t y = b.output(DType::F32, {4, 33}, "y");
  b.instr(OpCode::Neg, {x}, {y});
  auto exec = createExecutor(std::make_shared<Program>(b.p), "cuda", 1, err);
  ASSERT_TRUE(exec) << err;
  const size_t bytes = 4 * 33 * 4;
  void *in = mem->allocate(bytes, err), *out = mem->allocate(bytes, err);
  ASSERT_TRUE(in && out) << err;
  EXPECT_EQ(mem->liveBytes(), 2 * bytes);
  std::vector<float> zeros(4 * 33, 1.0f);
  ASSERT_EQ(cudaMemcpy(zeros.data(), out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(zeros, std::vector<float>(4 * 33, 0.0f)) << "allocate() zeroes";
  Rng rng;
  std::vector<float> v = rng.uniform(4 * 33), got(4 * 33);
  ASSERT_EQ(cudaMemcpy(in, v.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE(exec->setInput(0, in, bytes, err)) << err;
  ASSERT_TRUE(exec->run(err)) << err;
  ASSERT_TRUE(exec->getOutput(0, out, bytes, err)) << err;
  ASSERT_EQ(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(got[i], -v[i]) << i;
  mem->release(in);
  EXPECT_EQ(mem->liveBytes(), bytes);
  mem->release(out);
  EXPECT_EQ(mem->liveBytes(), 0u);
#endif
}

TEST(PipelineCuda, HostBuffersAreZeroedAndCounted) {
  std::string err;
  auto mem = createPipelineBuffers("cpu", err);
  ASSERT_TRUE(mem) << err;
  auto *p = static_cast<float *>(mem->allocate(64, err));
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(mem->liveBytes(), 64u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(p[i], 0.0f);
  mem->release(p);
  EXPECT_EQ(mem->liveBytes(), 0u);
  EXPECT_FALSE(createPipelineBuffers("tpu", err));
  EXPECT_EQ(err, "pipeline plans run on the cpu or cuda backend, not 'tpu'");
}

} // namespace

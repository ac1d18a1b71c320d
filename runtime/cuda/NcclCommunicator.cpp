//===- NcclCommunicator.cpp - Collectives between GPUs through NCCL -------===//
//
// Part of loom, under the Apache License v2.0.
//
// Run on one GPU only, as a world of one (make gpu-test, nccl-world-1);
// not yet on several GPUs.
//
// Setup: the device is LOCAL_RANK's; rank 0's ncclGetUniqueId travels to
// every rank over the TCP rendezvous; ncclCommInitRankConfig creates the
// world communicator in non-blocking mode (config.blocking = 0), so no
// NCCL call can block without our deadline. Each distinct group of the
// program (mesh axes mask) gets a communicator from ncclCommSplit with
// color = the group's lowest rank and key = the rank, so NCCL ranks in a
// group follow group (rank) order, as loom's collectives define it.
//
// Every NCCL call may return ncclInProgress; settle() polls
// ncclCommGetAsyncError until it is done, by the deadline. wait() polls the
// stream the same way and also watches the rendezvous connections: when a
// peer process dies, NCCL's kernels may spin forever instead of failing,
// but its TCP connection to rank 0 closes. On any failure every
// communicator is aborted (ncclCommAbort), which ends the spinning kernels.
//
// Layout: NCCL gathers and scatters along the outermost dim. loom's
// collectives name a dim; when dims before it are not all 1, the data goes
// through a scratch buffer [group][outer][chunk] and strided 2-D copies.
// Results are NCCL's (ring or tree order, f32 sums): deterministic for a
// fixed topology, not bit-identical to the CPU communicators.
//
// Point-to-point transfers (pipeline parallelism) are one NCCL group of
// ncclSend/ncclRecv on the world communicator (peers are world ranks),
// bytes as ncclUint8; NCCL matches a pair's transfers in posting order,
// which is loom's contract.
//===----------------------------------------------------------------------===//
#include "cuda/StreamCommunicator.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/NcclCommunicator.h"
#include "loom/runtime/Rendezvous.h"

#include <nccl.h>

#include <chrono>
#include <cstring>
#include <map>
#include <thread>

namespace loom::rt {

namespace {

using Clock = std::chrono::steady_clock;

class NcclWorld : public cuda::StreamCommunicator {
public:
  NcclWorld(Rendezvous &rv, double timeoutS) : rv_(rv), timeoutS_(timeoutS) {}

  ~NcclWorld() override {
    // After an abort the communicators are gone already.
    if (!aborted_) {
      for (auto &[mask, c] : groups_) ncclCommDestroy(c);
      if (world_) ncclCommDestroy(world_);
    }
    if (scratch_) cudaFree(scratch_);
    if (p2pStream_) cudaStreamDestroy(p2pStream_);
  }

  int worldSize() const override { return rv_.worldSize(); }
  const char *transport() const override { return "nccl"; }
  bool peerFailed() const override { return peerFailed_; }

  bool init(int localRank, std::string &err) {
    cudaError_t e = cudaSetDevice(localRank);
    if (e != cudaSuccess) {
      err = cat("rank ", rv_.rank(), ": cannot use GPU ", localRank, " (LOCAL_RANK): ",
                cudaGetErrorString(e));
      return false;
    }
    ncclUniqueId id{};
    std::string bytes;
    if (rv_.rank() == 0) {
      if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
        err = cat("ncclGetUniqueId: ", ncclGetErrorString(r));
        return false;
      }
      bytes.assign(reinterpret_cast<const char *>(&id), sizeof id);
    }
    if (!rv_.broadcast(bytes, err))
      return false;
    if (bytes.size() != sizeof id) {
      err = "rank 0 sent an NCCL unique id of the wrong size";
      return false;
    }
    std::memcpy(&id, bytes.data(), sizeof id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    auto deadline = Clock::now() + seconds();
    ncclResult_t r = ncclCommInitRankConfig(&world_, rv_.worldSize(), id, rv_.rank(), &config);
    return settle(world_, r, deadline, "ncclCommInitRankConfig", err);
  }

  bool prepare(const Program &p, int rank, void *, std::string &err) override {
    for (const Instr &I : p.instrs) {
      if (!isCollectiveOp(I.op))
        continue;
      int64_t mask = I.ints[2 + kMeshAxes];
      if (!groups_.count(mask)) {
        // Every rank meets the masks in the same (program) order, so the
        // splits pair up across ranks.
        std::vector<int> group = groupOf(rank, I.ints);
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t c = nullptr;
        auto deadline = Clock::now() + seconds();
        ncclResult_t r = ncclCommSplit(world_, group[0], rank, &c, &config);
        if (!settle(c ? c : world_, r, deadline, "ncclCommSplit", err))
          return false;
        groups_[mask] = c;
      }
    }
    // A pipeline rank prepares one program per stage and phase; they run
    // one at a time, so one scratch buffer, the largest, serves them all.
    uint64_t need = cuda::collectiveStagingBytes(p);
    if (need > scratchBytes_) {
      if (scratch_)
        cudaFree(scratch_);
      scratch_ = nullptr;
      scratchBytes_ = 0;
      if (cudaError_t e = cudaMalloc(&scratch_, need); e != cudaSuccess) {
        err = cat("cannot allocate ", need, " bytes of collective scratch: ", cudaGetErrorString(e));
        return false;
      }
      scratchBytes_ = need;
    }
    return true;
  }

  uint64_t deviceBytes(int) const override { return scratchBytes_; }

  // NCCL runs every collective on the executor's stream itself.
  bool join(int, int, cudaStream_t, std::string &) override { return true; }

  bool enqueue(int, int, const Instr &I, const std::vector<int64_t> &inShape,
               const std::vector<int64_t> &outShape, const float *in, float *out,
               cudaStream_t stream, std::string &err) override {
    if (aborted_) {
      err = "the NCCL communicator was aborted (an earlier failure); the job cannot go on";
      return false;
    }
    auto it = groups_.find(I.ints[2 + kMeshAxes]);
    if (it == groups_.end()) {
      err = "collective group was not prepared";
      return false;
    }
    ncclComm_t c = it->second;
    ncclRedOp_t op = I.ints[0] == 1 ? ncclAvg : ncclSum;
    int n = int(groupOf(rv_.rank(), I.ints).size());
    int64_t dim = I.ints[1];
    auto count = [](const std::vector<int64_t> &s) {
      int64_t k = 1;
      for (int64_t d : s) k *= d;
      return size_t(k);
    };
    auto deadline = Clock::now() + seconds();
    if (I.op == OpCode::AllReduce)
      return settle(c, ncclAllReduce(in, out, count(inShape), ncclFloat32, op, c, stream),
                    deadline, "ncclAllReduce", err);
    if (I.op == OpCode::CollectivePermute) {
      // Ring shift: send to member me + shift, receive from me - shift, as
      // one group so neither blocks the other (the dim slot is the shift).
      int me = Communicator::groupIndex(rv_.rank(), I.ints);
      int to = int(((int64_t(me) + I.ints[1]) % n + n) % n);
      int from = int(((int64_t(me) - I.ints[1]) % n + n) % n);
      ncclGroupStart();
      ncclSend(in, count(inShape), ncclFloat32, to, c, stream);
      ncclRecv(out, count(outShape), ncclFloat32, from, c, stream);
      return settle(c, ncclGroupEnd(), deadline, "ncclSend/ncclRecv (collective permute)", err);
    }
    // [outer, chunk * inner] around `dim` of the per-rank (smaller) shape.
    const std::vector<int64_t> &small = I.op == OpCode::AllGather ? inShape : outShape;
    size_t outer = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= size_t(small[d]);
    size_t piece = count(small) / outer; // floats per outer row and rank
    float *tmp = static_cast<float *>(scratch_);
    if (I.op == OpCode::AllGather) {
      if (outer == 1)
        return settle(c, ncclAllGather(in, out, count(inShape), ncclFloat32, c, stream),
                      deadline, "ncclAllGather", err);
      // NCCL writes [group][outer][piece]; loom wants [outer][group][piece].
      if (!settle(c, ncclAllGather(in, tmp, count(inShape), ncclFloat32, c, stream), deadline,
                  "ncclAllGather", err))
        return false;
      for (int g = 0; g < n; ++g)
        if (!copy2d(out + g * piece, n * piece, tmp + g * outer * piece, piece, piece, outer,
                    stream, err))
          return false;
      return true;
    }
    if (I.op == OpCode::AllToAll) {
      // Block g (per outer row: `per` floats) goes to group member g and
      // block g of the result comes from it; along an inner dim the blocks
      // are first made contiguous in scratch ([group][outer][per]) and the
      // received ones interleaved back.
      size_t per = piece / size_t(n);
      const float *src = in;
      float *dst = out;
      if (outer > 1) {
        for (int g = 0; g < n; ++g)
          if (!copy2d(tmp + g * outer * per, per, in + g * per, n * per, per, outer, stream, err))
            return false;
        src = tmp;
        dst = tmp + count(inShape);
      }
      ncclGroupStart();
      for (int g = 0; g < n; ++g) {
        ncclSend(src + g * outer * per, outer * per, ncclFloat32, g, c, stream);
        ncclRecv(dst + g * outer * per, outer * per, ncclFloat32, g, c, stream);
      }
      if (!settle(c, ncclGroupEnd(), deadline, "ncclSend/ncclRecv (all-to-all)", err))
        return false;
      for (int g = 0; g < n && outer > 1; ++g)
        if (!copy2d(out + g * per, n * per, dst + g * outer * per, per, per, outer, stream, err))
          return false;
      return true;
    }
    if (outer == 1)
      return settle(c, ncclReduceScatter(in, out, count(outShape), ncclFloat32, op, c, stream),
                    deadline, "ncclReduceScatter", err);
    // loom's input is [outer][group][piece]; NCCL scatters [group][...].
    for (int g = 0; g < n; ++g)
      if (!copy2d(tmp + g * outer * piece, piece, in + g * piece, n * piece, piece, outer, stream,
                  err))
        return false;
    return settle(c, ncclReduceScatter(tmp, out, count(outShape), ncclFloat32, op, c, stream),
                  deadline, "ncclReduceScatter", err);
  }

  bool enqueueSendRecv(int rank, const std::vector<P2POp> &ops, cudaStream_t stream,
                       std::string &err) override {
    if (aborted_) {
      err = "the NCCL communicator was aborted (an earlier failure); the job cannot go on";
      return false;
    }
    if (rank != rv_.rank()) {
      err = cat("this process is rank ", rv_.rank(), ", not ", rank);
      return false;
    }
    for (const P2POp &op : ops)
      if (op.peer < 0 || op.peer >= rv_.worldSize()) {
        err = cat("rank ", rank, ": peer ", op.peer, " is outside the ", rv_.worldSize(),
                  "-rank world");
        return false;
      }
    auto deadline = Clock::now() + seconds();
    ncclResult_t r = ncclGroupStart();
    for (const P2POp &op : ops) {
      if (r != ncclSuccess)
        break;
      r = op.kind == P2POp::Kind::Send
              ? ncclSend(op.send, size_t(op.bytes), ncclUint8, op.peer, world_, stream)
              : ncclRecv(op.recv, size_t(op.bytes), ncclUint8, op.peer, world_, stream);
    }
    // The group is closed even after a failed call, so NCCL's state stays
    // consistent; the first failure is the one reported.
    ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress)
      r = end;
    return settle(world_, r, deadline, "ncclSend/ncclRecv (point-to-point group)", err);
  }

  bool sendRecv(int rank, const std::vector<P2POp> &ops, std::string &err) override {
    if (!p2pStream_) {
      if (cudaError_t e = cudaStreamCreateWithFlags(&p2pStream_, cudaStreamNonBlocking);
          e != cudaSuccess) {
        err = cat("cannot create a stream for point-to-point transfers: ", cudaGetErrorString(e));
        return false;
      }
    }
    return enqueueSendRecv(rank, ops, p2pStream_, err) && wait(rank, p2pStream_, err);
  }

  bool wait(int, cudaStream_t stream, std::string &err) override {
    auto deadline = Clock::now() + seconds();
    while (true) {
      cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess)
        return true;
      if (e != cudaErrorNotReady) {
        err = cat("the GPU stream failed: ", cudaGetErrorString(e));
        abortAll();
        return false;
      }
      if (!healthy(err))
        return false;
      if (Clock::now() > deadline) {
        peerFailed_ = true;
        abortAll();
        err = cat("a collective did not finish within ", timeoutS_,
                  " s (a rank hung or is stuck elsewhere); aborted NCCL");
        return false;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  bool collective(int rank, const Instr &I, const std::vector<int64_t> &inShape,
                  const std::vector<int64_t> &outShape, const float *in, float *out,
                  std::string &err) override {
    if (rank != rv_.rank()) {
      err = cat("this process is rank ", rv_.rank(), ", not ", rank);
      return false;
    }
    return enqueue(rank, 0, I, inShape, outShape, in, out, nullptr, err) && wait(rank, nullptr, err);
  }

  void abort(const std::string &) override { abortAll(); }

private:
  Clock::duration seconds() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutS_));
  }

  bool copy2d(float *dst, size_t dpitch, const float *src, size_t spitch, size_t width,
              size_t height, cudaStream_t stream, std::string &err) {
    cudaError_t e = cudaMemcpy2DAsync(dst, dpitch * 4, src, spitch * 4, width * 4, height,
                                      cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess)
      err = cat("collective layout copy: ", cudaGetErrorString(e));
    return e == cudaSuccess;
  }

  /// Finishes a non-blocking NCCL call: polls while it is in progress.
  bool settle(ncclComm_t c, ncclResult_t r, Clock::time_point deadline, const char *what,
              std::string &err) {
    // A non-blocking communicator has finished an operation when its
    // asynchronous state leaves ncclInProgress, also when the call itself
    // returned ncclSuccess (seen on NCCL 2.28: ncclCommInitRankConfig
    // returned success and the next call on the communicator was refused,
    // "Attempt to use communicator before the previous operation returned
    // ncclSuccess").
    if (r == ncclSuccess && c && ncclCommGetAsyncError(c, &r) != ncclSuccess)
      r = ncclSuccess;
    while (r == ncclInProgress) {
      if (Clock::now() > deadline) {
        peerFailed_ = true;
        abortAll();
        err = cat(what, " did not complete within ", timeoutS_, " s; aborted NCCL");
        return false;
      }
      if (!healthy(err))
        return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (ncclCommGetAsyncError(c, &r) != ncclSuccess)
        break;
    }
    if (r == ncclSuccess)
      return true;
    err = cat(what, ": ", ncclGetErrorString(r), " (", ncclGetLastError(c), ")");
    peerFailed_ = r == ncclRemoteError;
    abortAll();
    return false;
  }

  /// No asynchronous NCCL error and no peer process gone.
  bool healthy(std::string &err) {
    for (ncclComm_t c : allComms()) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(c, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        err = cat("NCCL failed: ", ncclGetErrorString(async), " (", ncclGetLastError(c), ")");
        peerFailed_ = async == ncclRemoteError;
        abortAll();
        return false;
      }
    }
    if (int lost = rv_.lostPeer(); lost >= 0) {
      peerFailed_ = true;
      abortAll();
      err = cat("rank ", lost, " closed its connection (it exited or died); aborted NCCL");
      return false;
    }
    return true;
  }

  std::vector<ncclComm_t> allComms() const {
    std::vector<ncclComm_t> cs;
    if (world_) cs.push_back(world_);
    for (const auto &[mask, c] : groups_) cs.push_back(c);
    return cs;
  }

  void abortAll() {
    if (aborted_)
      return;
    aborted_ = true;
    for (ncclComm_t c : allComms()) ncclCommAbort(c);
  }

  Rendezvous &rv_;
  double timeoutS_;
  ncclComm_t world_ = nullptr;
  std::map<int64_t, ncclComm_t> groups_; // by axes mask
  void *scratch_ = nullptr;
  uint64_t scratchBytes_ = 0;
  cudaStream_t p2pStream_ = nullptr; // sendRecv's own stream
  bool aborted_ = false, peerFailed_ = false;
};

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(Rendezvous &rv, int localRank,
                                                     double timeoutS, std::string &err) {
  auto world = std::make_unique<NcclWorld>(rv, timeoutS);
  if (!world->init(localRank, err))
    return nullptr;
  return world;
}

} // namespace loom::rt

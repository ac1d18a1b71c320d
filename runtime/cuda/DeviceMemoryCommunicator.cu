//===- DeviceMemoryCommunicator.cu - Every rank of a job on one GPU -------===//
//
// Part of loom, under the Apache License v2.0.
//
// The simulated ranks of a plan on one GPU (loom train|verify --backend
// cuda --plan ... without --nproc): one CUDA executor per rank, each with
// its own stream, arena and scratch, all in one process, their collectives
// carried out here in device memory. NCCL cannot do this (it refuses two
// ranks on one device), and a job's GPU code (FSDP's gathered buffers, the
// tensor-parallel slices) should run on a GPU before it runs on many.
// This mode is for verification and memory measurement, not for speed:
// the ranks share one GPU's compute.
//
// Semantics, as NCCL on a side stream (PyTorch's process groups):
//   - each rank has a communication stream; the n-th collective a rank
//     makes over a group meets the n-th of every other member (a meeting
//     on the host, where each member leaves its input's address and its
//     ready event); it starts on the rank's stream once the streams of
//     every member have reached it. Counting per group matters for
//     pipelines: the ranks of different stages run different programs, so
//     they make different numbers of collectives over their own groups
//     before they meet in a common one (a rank-wide count, or the rank's
//     own slot numbers, would pair the wrong collectives, or wait forever);
//   - its output is computed on r's communication stream from the group's
//     inputs (device pointers into the other ranks' arenas, same device);
//   - the executor joins it (its stream waits for the collective to have
//     finished on every member of the group) only before an instruction
//     that touches the collective's input or output, so the kernels in
//     between overlap it.
// Arithmetic: reductions add the group's values in group (rank) order in
// double precision and round once (the mean divides before rounding):
// exactly Communicator::compute, so every rank gets identical bits and the
// run equals the CPU backend's collectives bit for bit. Gathers and
// scatters along an inner dim stage through the same [group][outer][chunk]
// buffer NCCL uses, so a rank allocates what one process per GPU would.
//
// Point-to-point transfers (sendRecv, enqueueSendRecv) meet in per-pair
// queues on the host, in posting order. Each call records a ready event on
// its stream (what it sends is written, what it receives may be
// overwritten); a matched pair is one device-to-device copy on the
// receiver's communication stream after both ready events, and a done
// event both sides' streams then wait on. The call returns once all of its
// transfers are matched (NCCL's group semantics), before the bytes move.
//
// A rank may hold several executors (a pipeline stage's forward, backward
// and optimizer programs), each preparing its own collectives: they get
// consecutive slots, found by the instruction's address at enqueue. A
// rank runs one program at a time, so join's "collectives 0..k" and
// wait's "all of them" mean those enqueued since the rank's last wait.
//===----------------------------------------------------------------------===//
#include "cuda/StreamCommunicator.h"
#include "lib/Diagnostics.h"
#include "loom/runtime/DeviceMemoryCommunicator.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

namespace loom::rt {

namespace cuda {

bool collectiveNeedsStaging(const Program &p, const Instr &I) {
  // A permute moves a whole buffer (its dim slot holds the shift).
  if (I.op == OpCode::AllReduce || I.op == OpCode::CollectivePermute)
    return false;
  const std::vector<int64_t> &small =
      p.buffers[I.op == OpCode::ReduceScatter ? I.out[0] : I.in[0]].shape;
  for (int64_t d = 0; d < I.ints[1]; ++d)
    if (small[d] != 1)
      return true;
  return false;
}

uint64_t collectiveStagingBytes(const Program &p) {
  uint64_t bytes = 0;
  for (const Instr &I : p.instrs) {
    if (!isCollectiveOp(I.op) || !collectiveNeedsStaging(p, I))
      continue;
    uint64_t big = std::max(p.buffers[I.in[0]].bytes, p.buffers[I.out[0]].bytes);
    // All-to-all stages both its input and what it receives.
    bytes = std::max(bytes, I.op == OpCode::AllToAll ? 2 * big : big);
  }
  return bytes;
}

} // namespace cuda

namespace {

constexpr int kMaxGroup = 64;

struct GroupPtrs {
  const float *p[kMaxGroup];
};

/// out[i] = sum over the group of in_g[from + i], in group order, in double,
/// rounded once (Communicator::compute's order and rounding).
__global__ void groupReduce(GroupPtrs in, int n, size_t from, float *out, size_t count, bool mean) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    double acc = 0;
    for (int g = 0; g < n; ++g) acc += double(in.p[g][from + i]);
    out[i] = float(mean ? acc / n : acc);
  }
}

std::string cudaErr(const char *what, cudaError_t e) {
  return cat(what, ": ", cudaGetErrorString(e));
}

size_t elements(const std::vector<int64_t> &s) {
  size_t n = 1;
  for (int64_t d : s) n *= size_t(d);
  return n;
}

class DeviceMemoryWorld : public cuda::StreamCommunicator {
public:
  explicit DeviceMemoryWorld(int world) : ranks_(world) {}

  ~DeviceMemoryWorld() override {
    for (Rank &r : ranks_) {
      for (cudaEvent_t e : r.ready) cudaEventDestroy(e);
      for (cudaEvent_t e : r.done) cudaEventDestroy(e);
      if (r.staging) cudaFree(r.staging);
      if (r.comm) cudaStreamDestroy(r.comm);
      if (r.host) cudaStreamDestroy(r.host);
    }
  }

  int worldSize() const override { return int(ranks_.size()); }
  const char *transport() const override { return "device-memory"; }

  bool prepare(const Program &p, int rank, void *, std::string &err) override {
    if (rank < 0 || rank >= worldSize())
      return fail(err, cat("rank ", rank, " is outside the ", worldSize(), "-rank world"));
    Rank &r = ranks_[size_t(rank)];
    cudaError_t e = cudaSuccess;
    if (!ensureStream(r.comm, err))
      return fail(err, cat("cannot create a communication stream: ", err));
    for (const Instr &I : p.instrs) {
      if (!isCollectiveOp(I.op))
        continue;
      r.slotOf[&I] = int(r.groups.size());
      std::vector<int> group = groupOf(rank, I.ints);
      if (int(group.size()) > kMaxGroup)
        return fail(err, cat("a collective group of ", group.size(), " ranks (one GPU runs at most ",
                             kMaxGroup, ")"));
      r.groups.push_back(std::move(group));
      r.staged.push_back(cuda::collectiveNeedsStaging(p, I));
      for (auto *events : {&r.ready, &r.done}) {
        events->emplace_back();
        if ((e = cudaEventCreateWithFlags(&events->back(), cudaEventDisableTiming)) != cudaSuccess)
          return fail(err, cudaErr("cannot create a CUDA event", e));
      }
    }
    // One staging buffer serves every program of the rank (they run one
    // at a time): the largest any of them needs.
    uint64_t need = cuda::collectiveStagingBytes(p);
    if (need > r.stagingBytes) {
      if (r.staging && (e = cudaFree(r.staging)) != cudaSuccess)
        return fail(err, cudaErr("freeing collective staging", e));
      r.staging = nullptr;
      r.stagingBytes = 0;
      if ((e = cudaMalloc(&r.staging, need)) != cudaSuccess)
        return fail(err, cat("cannot allocate ", need, " bytes of collective staging: ",
                             cudaGetErrorString(e)));
      r.stagingBytes = need;
    }
    return true;
  }

  bool enqueue(int rank, int k, const Instr &I, const std::vector<int64_t> &inShape,
               const std::vector<int64_t> &outShape, const float *in, float *out,
               cudaStream_t stream, std::string &err) override {
    Rank &r = ranks_[size_t(rank)];
    auto slot = r.slotOf.find(&I);
    if (slot == r.slotOf.end())
      return fail(err, cat("collective ", k, " was not prepared"));
    k = slot->second; // from here on, the rank's slot of the collective
    const std::vector<int> &group = r.groups[size_t(k)];
    const int n = int(group.size());
    int me = 0;
    while (group[size_t(me)] != rank) ++me;
    // [outer, n * piece] around dim of the larger side: what moves per rank
    // and outer row.
    int64_t dim = I.op == OpCode::CollectivePermute ? 0 : I.ints[1];
    const std::vector<int64_t> &big = I.op == OpCode::AllGather ? outShape : inShape;
    size_t outer = 1;
    for (int64_t d = 0; d < std::max<int64_t>(dim, 0); ++d) outer *= size_t(big[size_t(d)]);
    size_t total = elements(big), piece = total / outer / size_t(n);
    float *staging = static_cast<float *>(r.staging);
    const float *source = in; // what the group's peers read of this rank
    cudaError_t e = cudaSuccess;
    // Scatters along an inner dim: lay the input out [group][outer][piece]
    // first, on the rank's own stream (NCCL's staging, same bytes).
    if (r.staged[size_t(k)] && I.op != OpCode::AllGather) {
      for (int g = 0; g < n && e == cudaSuccess; ++g)
        e = cudaMemcpy2DAsync(staging + size_t(g) * outer * piece, piece * 4, in + size_t(g) * piece,
                              size_t(n) * piece * 4, piece * 4, outer, cudaMemcpyDeviceToDevice, stream);
      source = staging;
    }
    if (e == cudaSuccess)
      e = cudaEventRecord(r.ready[size_t(k)], stream);
    if (e != cudaSuccess)
      return failAndAbort(rank, err, cudaErr("collective input staging", e));
    // Host rendezvous: every member has recorded its ready event and said
    // where its input lives, at this meeting of the group.
    Meeting *meeting = nullptr;
    GroupPtrs ptrs{};
    std::vector<cudaEvent_t> readies(static_cast<size_t>(n));
    {
      std::unique_lock<std::mutex> lock(m_);
      auto key = std::make_pair(group, r.made[group]++);
      meeting = &meetings_[key];
      meeting->key = key;
      if (meeting->source.empty()) {
        meeting->source.assign(size_t(n), nullptr);
        meeting->ready.assign(size_t(n), nullptr);
        meeting->done.assign(size_t(n), nullptr);
      }
      meeting->source[size_t(me)] = source;
      meeting->ready[size_t(me)] = r.ready[size_t(k)];
      meeting->done[size_t(me)] = r.done[size_t(k)];
      ++meeting->arrived;
      cv_.notify_all();
      cv_.wait(lock, [&] { return aborted_ || meeting->arrived == n; });
      if (aborted_)
        return fail(err, abortWhy_);
      for (int g = 0; g < n; ++g) ptrs.p[g] = meeting->source[size_t(g)];
      readies = meeting->ready;
      r.runLog.push_back(meeting);
    }
    for (cudaEvent_t ready : readies)
      if ((e = cudaStreamWaitEvent(r.comm, ready, 0)) != cudaSuccess)
        return failAndAbort(rank, err, cudaErr("ordering a collective after its inputs", e));
    bool mean = I.ints[0] == 1;
    int blocks = 0;
    auto reduce = [&](size_t from, float *dst, size_t count) {
      blocks = int(std::min<size_t>((count + 255) / 256, 4096));
      groupReduce<<<std::max(blocks, 1), 256, 0, r.comm>>>(ptrs, n, from, dst, count, mean);
      return cudaGetLastError();
    };
    switch (I.op) {
    case OpCode::AllReduce:
      e = reduce(0, out, total);
      break;
    case OpCode::ReduceScatter: // chunk `me` of the group's sum
      e = reduce(size_t(me) * outer * piece, out, outer * piece);
      break;
    case OpCode::AllGather: {
      // Each member's whole input as a block; along an inner dim through
      // staging, then interleaved into [outer][group][piece].
      float *dst = r.staged[size_t(k)] ? staging : out;
      for (int g = 0; g < n && e == cudaSuccess; ++g)
        e = cudaMemcpyAsync(dst + size_t(g) * outer * piece, ptrs.p[g], outer * piece * 4,
                            cudaMemcpyDeviceToDevice, r.comm);
      for (int g = 0; g < n && e == cudaSuccess && dst != out; ++g)
        e = cudaMemcpy2DAsync(out + size_t(g) * piece, size_t(n) * piece * 4,
                              staging + size_t(g) * outer * piece, piece * 4, piece * 4, outer,
                              cudaMemcpyDeviceToDevice, r.comm);
      break;
    }
    case OpCode::AllToAll: {
      // Block g of the result is block `me` of member g's (staged) input.
      float *dst = r.staged[size_t(k)] ? staging + total : out;
      for (int g = 0; g < n && e == cudaSuccess; ++g)
        e = cudaMemcpyAsync(dst + size_t(g) * outer * piece, ptrs.p[g] + size_t(me) * outer * piece,
                            outer * piece * 4, cudaMemcpyDeviceToDevice, r.comm);
      for (int g = 0; g < n && e == cudaSuccess && dst != out; ++g)
        e = cudaMemcpy2DAsync(out + size_t(g) * piece, size_t(n) * piece * 4,
                              dst + size_t(g) * outer * piece, piece * 4, piece * 4, outer,
                              cudaMemcpyDeviceToDevice, r.comm);
      break;
    }
    case OpCode::CollectivePermute: { // the whole input of member me - shift
      int from = int(((int64_t(me) - I.ints[1]) % n + n) % n);
      e = cudaMemcpyAsync(out, ptrs.p[from], total * 4, cudaMemcpyDeviceToDevice, r.comm);
      break;
    }
    default:
      return failAndAbort(rank, err, cat(opcodeName(I.op), " is not a collective"));
    }
    (void)outShape;
    if (e == cudaSuccess)
      e = cudaEventRecord(r.done[size_t(k)], r.comm);
    if (e != cudaSuccess)
      return failAndAbort(rank, err, cudaErr(opcodeName(I.op), e));
    std::lock_guard<std::mutex> lock(m_);
    ++meeting->recorded;
    cv_.notify_all();
    return true;
  }

  bool join(int rank, int k, cudaStream_t stream, std::string &err) override {
    Rank &r = ranks_[size_t(rank)];
    k = std::min(k, int(r.runLog.size()) - 1);
    for (int n = r.joined + 1; n <= k; ++n) {
      Meeting *meeting = r.runLog[size_t(n)];
      std::vector<cudaEvent_t> done;
      {
        std::unique_lock<std::mutex> lock(m_);
        int members = int(meeting->done.size());
        cv_.wait(lock, [&] { return aborted_ || meeting->recorded == members; });
        if (aborted_)
          return fail(err, abortWhy_);
        done = meeting->done;
        // The last member to join forgets the meeting (its events are the
        // ranks' own, per collective slot).
        if (++meeting->left == members)
          meetings_.erase(meeting->key);
      }
      for (cudaEvent_t d : done)
        if (cudaError_t e = cudaStreamWaitEvent(stream, d, 0); e != cudaSuccess)
          return failAndAbort(rank, err, cudaErr("joining a collective", e));
      r.joined = n;
    }
    return true;
  }

  bool wait(int rank, cudaStream_t stream, std::string &err) override {
    Rank &r = ranks_[size_t(rank)];
    if (!join(rank, int(r.runLog.size()) - 1, stream, err))
      return false;
    r.joined = -1; // the next run starts joining from its first collective
    r.runLog.clear();
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
      return failAndAbort(rank, err, cudaErr("the GPU stream failed", e));
    return true;
  }

  bool enqueueSendRecv(int rank, const std::vector<P2POp> &ops, cudaStream_t stream,
                       std::string &err) override {
    if (rank < 0 || rank >= worldSize())
      return fail(err, cat("rank ", rank, " is outside the ", worldSize(), "-rank world"));
    for (const P2POp &op : ops)
      if (op.peer < 0 || op.peer >= worldSize())
        return fail(err, cat("rank ", rank, ": peer ", op.peer, " is outside the ", worldSize(),
                             "-rank world"));
    Rank &r = ranks_[size_t(rank)];
    cudaError_t e = cudaSuccess;
    if (!ensureStream(r.comm, err))
      return failAndAbort(rank, err, cat("cannot create a communication stream: ", err));
    // What this call sends is written and what it receives is free once
    // `stream` reaches here.
    cudaEvent_t raw = nullptr;
    if ((e = cudaEventCreateWithFlags(&raw, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventRecord(raw, stream)) != cudaSuccess)
      return failAndAbort(rank, err, cudaErr("recording a transfer's ready event", e));
    auto ready = sharedEvent(raw);
    std::vector<std::shared_ptr<CUevent_st>> done(ops.size());
    std::unique_lock<std::mutex> lock(m_);
    if (aborted_)
      return fail(err, abortWhy_);
    for (size_t k = 0; k < ops.size(); ++k) {
      const P2POp &op = ops[k];
      Posted posted{op.send, op.recv, op.bytes, ready, &done[k]};
      if (op.kind == P2POp::Kind::Send)
        sends_[{rank, op.peer}].push_back(posted);
      else
        recvs_[{op.peer, rank}].push_back(posted);
    }
    for (const P2POp &op : ops) {
      int from = op.kind == P2POp::Kind::Send ? rank : op.peer;
      int to = op.kind == P2POp::Kind::Send ? op.peer : rank;
      if (!match(from, to, err)) {
        if (!aborted_) {
          aborted_ = true;
          abortWhy_ = cat("rank ", rank, ": ", err);
        }
        cv_.notify_all();
        return false;
      }
    }
    cv_.notify_all();
    cv_.wait(lock, [&] {
      if (aborted_) return true;
      for (const auto &d : done)
        if (!d) return false;
      return true;
    });
    if (aborted_)
      return fail(err, abortWhy_);
    lock.unlock();
    for (const auto &d : done)
      if ((e = cudaStreamWaitEvent(stream, d.get(), 0)) != cudaSuccess)
        return failAndAbort(rank, err, cudaErr("ordering work after a transfer", e));
    return true;
  }

  bool sendRecv(int rank, const std::vector<P2POp> &ops, std::string &err) override {
    if (rank < 0 || rank >= worldSize())
      return fail(err, cat("rank ", rank, " is outside the ", worldSize(), "-rank world"));
    Rank &r = ranks_[size_t(rank)];
    cudaError_t e = cudaSuccess;
    if (!ensureStream(r.host, err))
      return failAndAbort(rank, err, cat("cannot create a stream for host transfers: ", err));
    if (!enqueueSendRecv(rank, ops, r.host, err))
      return false;
    if ((e = cudaStreamSynchronize(r.host)) != cudaSuccess)
      return failAndAbort(rank, err, cudaErr("a point-to-point transfer failed", e));
    return true;
  }

  bool collective(int rank, const Instr &, const std::vector<int64_t> &,
                  const std::vector<int64_t> &, const float *, float *,
                  std::string &err) override {
    return fail(err, cat("rank ", rank, ": the device-memory communicator runs collectives on "
                                        "CUDA streams (a cuda executor's), not host calls"));
  }

  void abort(const std::string &why) override {
    std::lock_guard<std::mutex> lock(m_);
    if (!aborted_) {
      aborted_ = true;
      abortWhy_ = why;
    }
    cv_.notify_all();
  }

  bool peerFailed() const override {
    std::lock_guard<std::mutex> lock(m_);
    return aborted_;
  }

  uint64_t deviceBytes(int rank) const override { return ranks_[size_t(rank)].stagingBytes; }

private:
  /// A posted, not yet matched transfer (one direction of a rank pair).
  struct Posted {
    const void *send = nullptr;
    void *recv = nullptr;
    uint64_t bytes = 0;
    std::shared_ptr<CUevent_st> ready;       // the posting call's
    std::shared_ptr<CUevent_st> *done = nullptr; // set when matched (in the call's frame)
  };

  /// Creates `s` once: a pipeline rank's senders (one thread per peer) and
  /// its receiving thread may reach here together.
  bool ensureStream(cudaStream_t &s, std::string &err) {
    std::lock_guard<std::mutex> lock(streamsMutex_);
    cudaError_t e = s ? cudaSuccess : cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
      err = cudaGetErrorString(e);
    return e == cudaSuccess;
  }

  static std::shared_ptr<CUevent_st> sharedEvent(cudaEvent_t e) {
    return std::shared_ptr<CUevent_st>(e, [](cudaEvent_t x) { cudaEventDestroy(x); });
  }

  /// Pairs the oldest unmatched send from `from` to `to` with the oldest
  /// receive, as long as both exist: a copy on the receiver's
  /// communication stream after both calls' ready events. Holding m_.
  bool match(int from, int to, std::string &err) {
    std::deque<Posted> &s = sends_[{from, to}], &r = recvs_[{from, to}];
    while (!s.empty() && !r.empty()) {
      Posted send = s.front(), recv = r.front();
      uint64_t k = matched_[{from, to}]++;
      if (send.bytes != recv.bytes)
        return fail(err, cat("transfer #", k, " from rank ", from, " to rank ", to, ": rank ", from,
                             " sends ", send.bytes, " bytes, rank ", to, " receives ", recv.bytes));
      cudaStream_t on = ranks_[size_t(to)].comm;
      cudaEvent_t raw = nullptr;
      cudaError_t e = cudaStreamWaitEvent(on, send.ready.get(), 0);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(on, recv.ready.get(), 0);
      if (e == cudaSuccess && send.bytes)
        e = cudaMemcpyAsync(recv.recv, send.send, size_t(send.bytes), cudaMemcpyDeviceToDevice, on);
      if (e == cudaSuccess) e = cudaEventCreateWithFlags(&raw, cudaEventDisableTiming);
      if (e == cudaSuccess) e = cudaEventRecord(raw, on);
      if (e != cudaSuccess) {
        if (raw) cudaEventDestroy(raw);
        return fail(err, cudaErr("a point-to-point copy", e));
      }
      *send.done = *recv.done = sharedEvent(raw);
      s.pop_front();
      r.pop_front();
    }
    return true;
  }

  /// The n-th collective of a group: per member (group order) its input,
  /// ready and done events; how many have arrived, recorded their part
  /// and joined it.
  struct Meeting {
    std::pair<std::vector<int>, int64_t> key;
    std::vector<const float *> source;
    std::vector<cudaEvent_t> ready, done;
    int arrived = 0, recorded = 0, left = 0;
  };

  struct Rank {
    cudaStream_t comm = nullptr;
    cudaStream_t host = nullptr; // sendRecv's own stream
    std::map<const Instr *, int> slotOf;    // every prepared program's collectives
    std::vector<Meeting *> runLog;          // meetings enqueued since the last wait
    std::vector<std::vector<int>> groups;   // per collective: the group, rank order
    std::vector<char> staged;               // per collective: through staging
    std::vector<cudaEvent_t> ready, done;   // per collective
    std::map<std::vector<int>, int64_t> made; // collectives made per group
    int joined = -1;                        // runLog entries joined this run
    void *staging = nullptr;
    uint64_t stagingBytes = 0;
  };

  static bool fail(std::string &err, std::string msg) {
    err = std::move(msg);
    return false;
  }
  bool failAndAbort(int rank, std::string &err, std::string msg) {
    err = std::move(msg);
    abort(cat("rank ", rank, " failed: ", err));
    return false;
  }

  std::vector<Rank> ranks_;
  std::map<std::pair<std::vector<int>, int64_t>, Meeting> meetings_;
  std::map<std::pair<int, int>, std::deque<Posted>> sends_, recvs_; // per (from, to)
  std::map<std::pair<int, int>, uint64_t> matched_;
  mutable std::mutex m_;
  std::mutex streamsMutex_;
  std::condition_variable cv_;
  bool aborted_ = false;
  std::string abortWhy_;
};

} // namespace

std::unique_ptr<Communicator> createDeviceMemoryCommunicator(int worldSize, std::string &err) {
  if (worldSize < 1) {
    err = "a device-memory communicator needs at least one rank";
    return nullptr;
  }
  return std::make_unique<DeviceMemoryWorld>(worldSize);
}

} // namespace loom::rt

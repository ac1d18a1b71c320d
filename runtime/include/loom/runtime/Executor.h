//===- Executor.h - Running a Program on a backend ------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
// The narrow boundary between a loaded Program and the device that runs it.
// A backend owns the arena (one allocation sized by the compiler) and runs the
// instruction list in order. The CPU backend is the reference; the CUDA
// backend implements the same interface.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_EXECUTOR_H
#define LOOM_RUNTIME_EXECUTOR_H

#include "loom/runtime/Program.h"

#include <memory>
#include <string>
#include <vector>

namespace loom::rt {

/// The device memory an executor allocated at creation, by purpose.
struct DeviceMemory {
  uint64_t arena = 0;         // the program's arena (Program::arenaBytes)
  uint64_t constants = 0;     // the constant blob
  uint64_t workspace = 0;     // kernel scratch and the GEMM library's workspace
  uint64_t communication = 0; // the communicator's staging for this rank
  uint64_t total() const { return arena + constants + workspace + communication; }
};

class Executor {
public:
  virtual ~Executor() = default;

  /// Copies `bytes` bytes into input `index` (Program::inputs order). The
  /// byte count must equal the buffer's size. Returns false with `err` set.
  virtual bool setInput(size_t index, const void *data, size_t bytes,
                        std::string &err) = 0;
  /// Runs every instruction once. Returns false with `err` set on failure.
  virtual bool run(std::string &err) = 0;
  /// Copies output `index` (Program::outputs order) into `data`.
  virtual bool getOutput(size_t index, void *data, size_t bytes,
                         std::string &err) = 0;

  /// Sets outputs `indices` aside as they are now, so that the runs that
  /// follow may overwrite them while readSnapshot() hands them out from
  /// another thread: a checkpoint written in the background
  /// (--async-checkpoint) without stopping training for the copy to the
  /// host. This base keeps the copy in host memory (getOutput); the CUDA
  /// backend keeps it on the device (a device-to-device copy queued before
  /// the next run) and copies it to the host on a stream of its own.
  virtual bool snapshotOutputs(const std::vector<size_t> &indices, std::string &err);
  /// Output indices[k] of the last snapshotOutputs(). May run on another
  /// thread while run() goes on; one reader at a time.
  virtual bool readSnapshot(size_t k, void *data, size_t bytes, std::string &err);
  /// Bytes the snapshot holds (on the device for CUDA, on the host else).
  uint64_t snapshotBytes() const { return snapshotBytes_; }

  const Program &program() const { return *program_; }
  /// Bytes of accelerator memory the executor holds (all of it is
  /// allocated at creation); 0 for the CPU backend.
  uint64_t deviceMemoryBytes() const { return deviceMemory().total(); }
  /// The same by purpose (all zero for the CPU backend).
  virtual DeviceMemory deviceMemory() const { return {}; }
  /// What runs the program ("cpu", or the GPU's name).
  virtual std::string deviceName() const { return "cpu"; }

protected:
  explicit Executor(std::shared_ptr<const Program> p) : program_(std::move(p)) {}
  std::shared_ptr<const Program> program_;
  uint64_t snapshotBytes_ = 0;

private:
  std::vector<std::vector<char>> hostSnapshot_; // the base implementation's copy
};

/// Device bytes `backend` allocates beside the program's arena and
/// constants (kernel scratch, GEMM workspace): what a buffer plan misses of
/// the memory a run takes. 0 for "cpu" and for a backend not built.
uint64_t backendWorkspaceBytes(const Program &p, const std::string &backend);

/// Device bytes a rank of a multi-rank `p` allocates on `backend` for its
/// collectives (staging of gathers and scatters along inner dims, as NCCL
/// needs it): 0 for "cpu", for programs without collectives and for a
/// backend not built.
uint64_t backendCommunicationBytes(const Program &p, const std::string &backend);

/// Creates an executor for `backend` ("cpu"; "cuda" when built with CUDA).
/// `threads` <= 0 means one per hardware thread.
std::unique_ptr<Executor> createExecutor(std::shared_ptr<const Program> p,
                                         const std::string &backend,
                                         int threads, std::string &err);

class Communicator;

/// Rank `rank` of a multi-rank world: the program's collectives go through
/// `comm`, which must outlive the executor (cpu: any CPU communicator;
/// cuda: an NCCL communicator (NcclCommunicator.h, one process per GPU) or
/// the device-memory one (DeviceMemoryCommunicator.h, every rank on one GPU)).
std::unique_ptr<Executor> createRankExecutor(std::shared_ptr<const Program> p,
                                             const std::string &backend, int threads,
                                             Communicator *comm, int rank, std::string &err);

} // namespace loom::rt

#endif

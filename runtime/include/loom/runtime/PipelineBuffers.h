//===- PipelineBuffers.h - Where a pipeline rank keeps its tensors -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Between its programs a pipeline rank holds tensors: each in-flight
// microbatch's saved activations, the activations and gradients it
// receives or is about to send, and the gradient accumulators. They live
// where the rank's executors and communicator work: host memory for the
// CPU backend, device memory for CUDA (a stage's activations never cross
// PCIe, and the device-memory or NCCL communicator moves them GPU to GPU).
// Each one is freed when the schedule says its microbatch no longer needs
// it, so the device holds what `loom plan` counts as in flight.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_PIPELINEBUFFERS_H
#define LOOM_RUNTIME_PIPELINEBUFFERS_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace loom::rt {

class PipelineBuffers {
public:
  virtual ~PipelineBuffers() = default;
  /// `bytes` zeroed bytes the backend's executors read and write (their
  /// setInput / getOutput take the pointer); null with `err`.
  virtual void *allocate(size_t bytes, std::string &err) = 0;
  virtual void release(void *data) = 0;
  /// Bytes allocated and not yet released.
  uint64_t liveBytes() const { return live_; }

protected:
  uint64_t live_ = 0;
};

/// The buffers of `backend` ("cpu": host; "cuda": device, when built with
/// CUDA); null with `err` for another backend.
std::unique_ptr<PipelineBuffers> createPipelineBuffers(const std::string &backend,
                                                       std::string &err);

#ifdef LOOM_HAVE_CUDA
/// Device buffers on the current GPU (runtime/cuda/PipelineDeviceBuffers.cpp).
std::unique_ptr<PipelineBuffers> createCudaPipelineBuffers();
#endif

} // namespace loom::rt

#endif

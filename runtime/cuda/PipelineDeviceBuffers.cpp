//===- PipelineDeviceBuffers.cpp - A pipeline rank's tensors on the GPU ---===//
//
// Part of loom, under the Apache License v2.0.
//
// Plain cudaMalloc / cudaFree per tensor, not a caching pool: a freed
// microbatch's activations go back to the device at once, so the memory a
// run measures (cudaMemGetInfo) follows the schedule's in-flight count.
// cudaFree waits for the device; the simulated ranks on one GPU are for
// verification and memory measurement, not speed. The executors copy in
// and out of these buffers device to device (cudaMemcpyDefault).
//===----------------------------------------------------------------------===//
#include "lib/Diagnostics.h"
#include "loom/runtime/PipelineBuffers.h"

#include <cuda_runtime.h>

#include <algorithm>

#include <mutex>
#include <unordered_map>

namespace loom::rt {

namespace {

class DeviceBuffers : public PipelineBuffers {
public:
  ~DeviceBuffers() override {
    for (auto &[ptr, bytes] : sizes_) cudaFree(ptr);
    if (stream_)
      cudaStreamDestroy(stream_);
  }

  void *allocate(size_t bytes, std::string &err) override {
    void *ptr = nullptr;
    cudaError_t e = ensureStream();
    if (e == cudaSuccess)
      e = cudaMalloc(&ptr, std::max<size_t>(bytes, 1));
    // Zeroed before anyone reads it: a plain cudaMemset runs on the
    // legacy stream, which the executors' non-blocking streams do not
    // wait for.
    if (e == cudaSuccess) {
      e = cudaMemsetAsync(ptr, 0, bytes, stream_);
      if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream_);
      if (e != cudaSuccess)
        cudaFree(ptr);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      err = cat("cannot allocate ", bytes, " bytes of pipeline activations on the GPU: ",
                cudaGetErrorString(e));
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(m_);
    sizes_[ptr] = bytes;
    live_ += bytes;
    return ptr;
  }

  void release(void *data) override {
    {
      std::lock_guard<std::mutex> lock(m_);
      auto it = sizes_.find(data);
      if (it == sizes_.end())
        return;
      live_ -= it->second;
      sizes_.erase(it);
    }
    cudaFree(data);
  }

private:
  cudaError_t ensureStream() {
    std::lock_guard<std::mutex> lock(m_);
    return stream_ ? cudaSuccess : cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  }

  std::mutex m_; // a rank's senders release what they sent on their threads
  cudaStream_t stream_ = nullptr;
  std::unordered_map<void *, size_t> sizes_;
};

} // namespace

std::unique_ptr<PipelineBuffers> createCudaPipelineBuffers() {
  return std::make_unique<DeviceBuffers>();
}

} // namespace loom::rt

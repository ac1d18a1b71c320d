//===- TensorBoard.h - Scalars in TensorBoard's event-file format -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// `loom train --tensorboard DIR` writes the per-step scalars (loss, grad
// norm, lr, tokens/s, memory) as TensorBoard reads them, without TensorFlow
// or protobuf: an event file is a TFRecord stream of `Event` messages
// (tensorflow/core/util/event.proto), each record
//   uint64 length | uint32 masked crc32c(length) | data | uint32 masked crc32c(data)
// (little-endian; masked(c) = rotate-right(c, 15) + 0xa282ead8), the first
// event carrying file_version "brain.Event:2", the others a Summary with
// one simple_value per tag. The few protobuf fields are encoded by hand.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_TENSORBOARD_H
#define LOOM_RUNTIME_TENSORBOARD_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace loom::rt {

/// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), as TFRecord uses.
uint32_t crc32c(const void *data, size_t n);

class TensorBoardWriter {
public:
  TensorBoardWriter() = default;
  TensorBoardWriter(const TensorBoardWriter &) = delete;
  TensorBoardWriter &operator=(const TensorBoardWriter &) = delete;
  ~TensorBoardWriter();

  /// Creates `dir` (and its parents) and a new event file in it named as
  /// TensorBoard expects (events.out.tfevents.<seconds>.<host>.<pid>.loom),
  /// starting with the file-version event.
  bool open(const std::string &dir, std::string &err);
  /// One event at `step` holding every (tag, value) pair; flushed, so a
  /// TensorBoard watching the folder sees each step as it ends.
  bool scalars(int64_t step, const std::vector<std::pair<std::string, float>> &values,
               std::string &err);
  const std::string &path() const { return path_; }

private:
  bool writeRecord(const std::string &data, std::string &err);
  std::FILE *file_ = nullptr;
  std::string path_;
};

} // namespace loom::rt

#endif

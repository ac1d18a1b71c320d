//===- FileBytes.h - Reading a whole file -----------------------*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Schedules, stage-cost profiles, checkpoints' JSON, .npy/.npz and token
// files are read whole before they are parsed; each caller words its own
// error (which file, what it was for), so this only says whether it could.
//===----------------------------------------------------------------------===//
#ifndef LOOM_IO_FILEBYTES_H
#define LOOM_IO_FILEBYTES_H

#include <string>

namespace loom::io {

/// The bytes of `path` in `out`; false when it cannot be opened or read.
bool readFileBytes(const std::string &path, std::string &out);

} // namespace loom::io

#endif

//===- AdamWGroups.h - Small AdamW instructions launched together -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A training step updates each parameter with an AdamW instruction of its
// own. Norm weights and biases are many and small: gpt2-large's step has
// 290 AdamWs of 1,280 to 5,120 elements, qwen2.5-1.5b's 141. On a GPU
// each is a launch that moves a few tens of kB in about as many
// microseconds as a launch takes (H200 profile: 290 launches, 1.8 ms of a
// 113 ms step). The CUDA backend runs such a group as one launch over a
// table of the members' operands.
//
// The program still says one AdamW per parameter, and the CPU backend runs
// them one by one: each element's update is the same function either way
// (cpu/AdamWMath.h), so grouping changes no bits. The rule lives here,
// not in the backend, so that the planner prices what the backend runs.
//
// Members are AdamW instructions of at most `maxElements` elements that
// keep no amax, with the same floats (betas, eps, weight decay) and the
// same lr, step and scale buffers. A group launches where its first member
// stands, so each later member moves up to there. It may when nothing in
// between writes the bytes it reads or touches the bytes it writes, and
// when no other member writes bytes it reads or writes (the members run
// concurrently). Bytes are arena bytes (a column block its columns,
// buffersOverlap), so reuse of a slot by a later
// buffer counts. Programs with collectives are not grouped: their joins
// are planned per instruction (CudaExecutor).
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_ADAMWGROUPS_H
#define LOOM_RUNTIME_ADAMWGROUPS_H

#include "loom/runtime/Program.h"

#include <cstdint>
#include <vector>

namespace loom::rt {

struct AdamWGroup {
  std::vector<size_t> members; // instruction indices in program order; the
                               // first is where the group launches
};

/// Parameters up to this many elements count as small: 64 Ki elements is
/// 1.25 MiB of AdamW traffic, a few microseconds at HBM rates, where one
/// launch's overhead is still a sizeable share.
constexpr int64_t kSmallAdamWElements = int64_t(1) << 16;

/// The groups of two or more small AdamWs, in order of their first member.
/// Needs a placed program (arena offsets). Empty for a program with
/// collectives.
std::vector<AdamWGroup> smallAdamWGroups(const Program &p,
                                         int64_t maxElements = kSmallAdamWElements);

} // namespace loom::rt

#endif // LOOM_RUNTIME_ADAMWGROUPS_H

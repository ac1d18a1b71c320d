//===- ProgramStats.h - What a program's instructions are made of -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// A report for people tuning codegen: instructions per opcode and, for every
// cast that converts (in and out dtypes differ), the opcodes of the
// instruction that wrote its input and of those that read its output. Each
// such cast is a full pass over memory that a kernel reading or writing the
// other dtype could absorb; the pairs say which kernels matter most.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_PROGRAMSTATS_H
#define LOOM_RUNTIME_PROGRAMSTATS_H

#include "loom/runtime/Program.h"

#include <map>
#include <string>

namespace loom::rt {

struct ProgramStats {
  std::map<std::string, int64_t> perOpcode; // opcode name -> instructions
  // "f32->bf16" (converting casts), "copy" (same dtype: reshape or copy).
  std::map<std::string, int64_t> castKinds;
  // "producer -> [f32->bf16] -> consumer, consumer": one key per converting
  // cast's neighbourhood, counted. "input"/"constant" when no instruction
  // wrote the cast's source, "output" when the result leaves the program.
  std::map<std::string, int64_t> castSites;
  // "bf16 x bf16 -> bf16 (+bias)": MatMul instructions by operand and
  // result dtypes; the bias suffix when the GEMM adds one in its epilogue.
  std::map<std::string, int64_t> gemmKinds;
  // GEMMs whose operands are both f32: under --precision bf16, what
  // autocast would have run on bf16 tensor cores but loom does not.
  int64_t f32Gemms = 0;
  // Bytes each opcode moves at the least: every operand read once and
  // every result written once (what fusing instructions saves shows as the
  // difference between two programs' totals).
  std::map<std::string, int64_t> bytesPerOpcode;
  // 2 M N K summed over MatMul and ScaledMatMul instructions.
  double gemmFlops = 0;
  // Attention and AttentionGrad instructions, those that fused bf16
  // flash-attention engines may run (FusedAttentionEligibility.h), and the
  // others by reason.
  // Fp8Scale instructions by what they read: "amax from OPCODE" (a [1, 1]
  // maximum that instruction found: a fused producer, AdamW's kept weight
  // amax, Fp8Amax) or "tensor from OPCODE" / "tensor from input" (a pass
  // over the whole tensor or its rows).
  std::map<std::string, int64_t> fp8ScaleSources;
  int64_t attention = 0, fusedAttention = 0;
  std::map<std::string, int64_t> attentionRefusals;
  int64_t instrs = 0;
  int64_t converting = 0; // casts whose dtypes differ
  int64_t views = 0;      // reshapes that name their source's bytes (no copy)
  int64_t columnBlocks = 0; // sibling operands side by side in a joined base
  // Small AdamWs the CUDA backend launches together (AdamWGroups.h): the
  // instructions and their launches.
  int64_t groupedAdamWs = 0, adamwGroups = 0;
};

ProgramStats programStats(const Program &p);

/// The stats as text, one item per line, largest counts first.
std::string formatProgramStats(const ProgramStats &s);

} // namespace loom::rt

#endif

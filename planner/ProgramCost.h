//===- ProgramCost.h - Step time of a compiled program, instruction by instruction -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// The one-GPU step as it will run: the runtime program codegen made
// (autocast's casts, fused kernels, the f32 weight-gradient GEMMs, gradient
// clipping, AdamW), each instruction priced from what `loom calibrate`
// measured for its kind:
//   - GEMMs (MatMul, ScaledMatMul): 2 M N K FLOPs at the calibrated
//     efficiency for their operand and result dtypes (bf16 -> bf16,
//     bf16 -> f32, f32, fp8) at the cube of equal work, or their bytes at
//     the copy bandwidth when that is slower;
//   - attention and its gradient: the planner's FLOP convention
//     (CostModel.cpp) at the calibrated efficiency for the sequence length;
//   - every other instruction is memory-bound: the bytes it moves (each
//     operand read once, each result written once; an embedding reads only
//     the rows it gathers) at its opcode class's calibrated bandwidth, plus
//     one launch. A class the profile has no figure for is priced at the
//     copy bandwidth, and the result says which.
// Describing a program (describeProgram) needs no hardware, so the planner
// keeps the description and prices it per profile (priceProgram).
//===----------------------------------------------------------------------===//
#ifndef LOOM_PLANNER_PROGRAMCOST_H
#define LOOM_PLANNER_PROGRAMCOST_H

#include "loom/runtime/Program.h"
#include "planner/HardwareProfile.h"

#include <map>
#include <string>
#include <vector>

namespace loom::planner {

enum class InstrKind : uint8_t { Gemm, Attention, MemoryBound };

/// Which calibrated GEMM rate prices a product.
enum class GemmRate : uint8_t { Bf16, Bf16F32Out, F32, Fp8 };

/// What one instruction asks of the hardware.
struct InstrWork {
  std::string cls; // opcode class, as LOOM_CUDA_PROFILE=1 names it ("matmul bf16", "adamw")
  InstrKind kind = InstrKind::MemoryBound;
  double bytes = 0; // bytes moved (operands read once, results written once)
  double flops = 0; // GEMM: 2 M N K; attention: the planner's convention, causal halved
  double cube = 0;  // GEMM: cbrt(M N K), the calibrated curves' size
  double m = 0, n = 0, k = 0; // GEMM: rows (batch folded in), columns, contracted dim
  GemmRate rate = GemmRate::Bf16;
  double seq = 0;        // attention: query length (the efficiency lookup)
  double headDim = 0;    // attention: the head dim (which calibrated table)
  bool backward = false; // attention_grad
  double stagingBytes = 0; // GEMM: the CUDA backend's padded-row copies (GemmStaging.h)
  double columnSumBytes = 0; // GEMM: B read again for its column sums, and the sums (matMulSumsB)
  bool sharesLaunch = false; // a small AdamW run in its group's launch (AdamWGroups.h): no
                             // launch overhead of its own
};

/// The opcode class of an instruction: the opcode's name, and for GEMMs
/// the result's dtype ("matmul f32"), the key LOOM_CUDA_PROFILE=1 prints.
std::string instrClass(const rt::Program &p, const rt::Instr &I);
/// Bytes an instruction moves at the least: each operand read once and
/// each result written once, except an embedding lookup, which reads only
/// the rows it gathers (ids, then as many table bytes as it writes).
double instrBytes(const rt::Program &p, const rt::Instr &I);
InstrWork describeInstr(const rt::Program &p, const rt::Instr &I);
std::vector<InstrWork> describeProgram(const rt::Program &p);

/// The opcode classes `loom calibrate` measures a bandwidth for (the
/// memory-bound kernels of the training steps loom compiles).
const std::vector<std::string> &calibratedMemoryClasses();

struct ClassTime {
  int instrs = 0;
  double seconds = 0, bytes = 0, flops = 0;
  std::string rate; // how it was priced: "calibrated 2395 GB/s", "bf16 GEMM curve", ...
  bool fallback = false; // no figure of its own in the profile: the copy's (or bf16 curve)
};

struct ProgramTime {
  double seconds = 0;
  double optimizer = 0; // the adamw, sum_squares and global_sum_squares (clipping) classes
  std::map<std::string, ClassTime> classes;
  /// Classes priced with a stand-in figure, for a note.
  std::vector<std::string> fallbacks() const;
};

/// Seconds one instruction takes on `hw` (memory-bound: with one launch;
/// GEMM and attention figures were calibrated with their launch in them).
double instrSeconds(const InstrWork &w, const HardwareProfile &hw, std::string *rate = nullptr,
                    bool *fallback = nullptr);
ProgramTime priceProgram(const std::vector<InstrWork> &work, const HardwareProfile &hw);

} // namespace loom::planner

#endif

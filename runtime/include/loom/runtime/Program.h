//===- Program.h - The runtime program: buffers and a flat list of calls --===//
//
// Part of loom, under the Apache License v2.0.
//
// A Program is what the compiler hands the runtime: a table of buffers with
// static shapes, a blob of constant data, and a flat list of kernel calls.
// It has no MLIR dependency; codegen builds it, the artifact file stores it
// (see Artifact.h and docs/artifact-format.md), and backends execute it.
//
// Memory model: every non-constant buffer lives at a fixed byte offset inside
// one arena whose size the compiler planned with liveness-based reuse, so a
// backend allocates exactly one block per run (no per-call allocation).
// Constants live in the program's constant blob.
//===----------------------------------------------------------------------===//
#ifndef LOOM_RUNTIME_PROGRAM_H
#define LOOM_RUNTIME_PROGRAM_H

#include <cstdint>
#include <string>
#include <vector>

namespace loom::rt {

/// Element types. Values are stable: they are written into artifacts.
/// F8E4M3 and F8E5M2 are the OCP 8-bit floats (loom/runtime/Fp8.h): only
/// the fp8 opcodes (120-122) compute on them; data movement copies them.
enum class DType : uint8_t { F32 = 1, F64 = 2, BF16 = 3, I64 = 4, I32 = 5, Bool = 6,
                             F8E4M3 = 7, F8E5M2 = 8 };

/// The OCP 8-bit float dtypes.
inline bool isFp8(DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; }

/// Size in bytes of one element (Bool is one byte).
size_t dtypeSize(DType t);
const char *dtypeName(DType t);

/// What a buffer is for. Values are stable.
enum class BufferKind : uint8_t {
  Input = 1,    // written by the caller before a run (token ids, ...)
  Output = 2,   // read by the caller after a run (logits, loss, ...)
  Constant = 3, // data in Program::constants, read-only
  Temp = 4,     // intermediate, lives in the arena at `offset`
};

struct BufferDesc {
  std::string name;           // diagnostic name (ONNX value or weight name)
  DType dtype = DType::F32;
  std::vector<int64_t> shape; // static; rank 0 is a scalar
  BufferKind kind = BufferKind::Temp;
  uint64_t offset = 0;        // arena offset (Input/Output/Temp) or offset in
                              // Program::constants (Constant)
  uint64_t bytes = 0;         // numElements * dtypeSize
  // A column block of a wider base (a BufferView with a column): the rows
  // of shape.back() elements start rowPitch elements apart, the first at
  // `offset`. 0: contiguous. Set with the view (and by the artifact reader
  // from it); see BufferView.
  int64_t rowPitch = 0;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

/// Kernel opcodes. Values are stable: they are written into artifacts.
/// For each: inputs (`in`), outputs (`out`), integer attributes (`ints`) and
/// float attributes (`floats`). Shapes and dtypes come from the buffer table.
/// Broadcasting follows NumPy/ONNX rules (right-aligned, size-1 dims stretch).
enum class OpCode : uint16_t {
  // in: table[V,D], ids[...] (I64) -> out[..., D]. Row gather.
  Embedding = 1,
  // in: a[..., M, K], b[..., K, N] (each may be transposed in its last two
  // dims) -> out[..., M, N]; batch dims broadcast. ints: [transA, transB].
  // bf16 operands give a bf16 result accumulated in f32 and rounded once,
  // or an f32 result (the f32 accumulator, not rounded). An optional third
  // input bias[N] (the result's dtype) is added to every row of the
  // accumulator before that one rounding (addmm; cuBLASLt's bias epilogue).
  // A third input with the result's shape and dtype instead is an addend
  // (f32 or f64): out = addend + product, the f32 accumulator plus
  // the addend rounded once (a GEMM with beta = 1; matMulAccumulates()).
  // ints [transA, transB, 1] add a second output: the column sums of B
  // (bf16 [K, N], rank-2 operands, no third input, a bf16 result), N
  // values of bf16, each rounded from an f32 sum (a bias's gradient from
  // its weight-gradient GEMM; matMulSumsB(), codegen's foldBiasGradients).
  MatMul = 2,
  // Elementwise binary with broadcasting: in: a, b -> out.
  Add = 10, Sub = 11, Mul = 12, Div = 13, Pow = 14, Max = 15, Min = 16,
  // in: cond (Bool), a, b -> out = cond ? a : b, broadcasting.
  Where = 17,
  // Elementwise unary: in: x -> out (same shape).
  Neg = 30, Sqrt = 31, Rsqrt = 32, Reciprocal = 33, Exp = 34, Tanh = 35,
  Sigmoid = 36, Silu = 37,
  GeluTanh = 38, // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  GeluErf = 39,  // 0.5 x (1 + erf(x / sqrt(2)))
  Cos = 40, Sin = 41, Log = 42,
  Relu = 44,     // max(x, 0)
  Erf = 45,      // erf(x)
  Softplus = 46, // log(1 + e^x), as max(x, 0) + log1p(e^-|x|)
  // Copy with dtype conversion (also a plain copy when dtypes match); the
  // element count of in and out is equal (used for Reshape too).
  Cast = 43,
  // in: x -> out. ints: [kind (0 sum, 1 mean, 2 max), axis0, axis1, ...];
  // out has x's rank with reduced dims set to 1, or fewer dims (keepdims
  // off): either way its element order matches.
  Reduce = 50,
  // in: x -> out, softmax along ints[0] (a non-negative axis).
  Softmax = 51,
  // in: x[..., D], w[D] -> out. floats: [eps].
  // y = x / sqrt(mean(x^2) + eps) * w.
  RmsNorm = 52,
  // in: a[..., D], b (a's shape), w[D] -> sum (a's shape), y. floats: [eps].
  // sum = a + b, rounded to its dtype as Add does; y = RmsNorm(sum, w):
  // a residual add and the norm that reads it, with the bits of the two
  // (loom.add_rms_norm). a, b and y may be bf16 storage; sum and w are not.
  AddRmsNorm = 59,
  // in: x[..., D], w[D], b[D] (b optional: 2 or 3 inputs) -> out.
  // floats: [eps]. y = (x - mean) / sqrt(var + eps) * w + b.
  LayerNorm = 53,
  // in: x[..., T, D], cos, sin (broadcastable to x) -> out.
  // out = x * cos + rotate_half(x) * sin, where
  // rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2]).
  Rotary = 54,
  // in: q[B, Hq, T, D], k[B, Hkv, S, D], v[B, Hkv, S, Dv]
  // -> o[B, Hq, T, Dv], lse[B, Hq, T].
  // Hq % Hkv == 0; query head h reads kv head h / (Hq / Hkv).
  // ints: [causal] or [causal, bf16_operands]; floats: [scale].
  // o = softmax(scale q k^T + mask) v, where the causal mask hides key
  // j > query i (+ S - T offset when S > T). lse is each query row's
  // natural-log logsumexp over its visible keys, log sum_j exp(scale q_i.k_j),
  // and +inf for a row that sees no key, so that exp(s - lse) = 0 there:
  // the statistics AttentionGrad needs (FlashAttention's contract), saved
  // so that the backward does not redo the forward's reductions. lse has
  // the computation's dtype: f32 (also when q, k, v or o are bf16 storage),
  // or f64 for f64 operands. bf16_operands = 1 says q, k, v
  // hold bf16-representable values (autocast's rounding): a backend may then
  // run the products on bf16 tensor cores, rounding the probabilities to
  // bf16 for P V as FlashAttention does. AttentionGrad takes the same ints.
  // q, k, v and o may be bf16 storage (bf16StorageAllowed below), lse never:
  // the computation stays f32, so bf16_operands still says what q, k, v hold.
  // ints[2] (optional, causal only): a sliding window w > 0, which also
  // hides key j <= i + (S - T) - w; floats[1] (optional): a softcap c > 0,
  // the scores becoming c tanh(scale q k^T / c) before the mask and softmax.
  // AttentionGrad takes the same optional attributes.
  // ints[3] (optional): the operands' layout (AttentionLayout.h): 0 as
  // above, 1 tokens-major, q [B, T, Hq, D], k and v [B, S, Hkv, D], o
  // [B, T, Hq, Dv] (lse stays [B, Hq, T]); ints[2] is then present (0 for no
  // window).
  Attention = 55,
  // in: x -> out[] (rank 0, x's dtype): the sum over every element of
  // x * x, each square rounded to x's dtype before it is added (the same
  // value as Mul(x, x) followed by a Reduce sum over every axis, with one
  // pass over x). The sum accumulates in double; the CPU adds in flat
  // element order, the CUDA backend in Reduce's fixed order.
  SumSquares = 56,
  // in: x0, x1, ... (at least one; one dtype, f32 or f64) -> out[] (rank
  // 0, that dtype): ((s0 + s1) + s2) + ..., s_i the SumSquares of x_i
  // (rounded to the dtype) and each + rounded to it: the value of N
  // SumSquares and the chain of Adds after them (the gradient norm's
  // squared sum, passes/FuseGlobalSumSquares.cpp), with every SumSquares
  // summed as SumSquares is, in one instruction.
  GlobalSumSquares = 58,
  // in: gate, up (same shape) -> out = silu(gate) up, silu(x) = x / (1 + e^-x)
  // (Llama's gated feed-forward; silu(gate) is not rounded on the way).
  SwiGlu = 57,
  // in: x -> out. ints: perm (out dim i is x dim perm[i]).
  Transpose = 60,
  // in: x -> out. ints: [start_0, step_0, start_1, step_1, ...] for every
  // dim of x; out's shape gives the count per dim. Steps may be negative.
  Slice = 61,
  // in: x0, x1, ... -> out, joined along ints[0].
  Concat = 62,
  // in: x -> out0, out1, ... split along ints[0]; sizes from out shapes.
  Split = 63,
  // in: x -> out, broadcast to out's shape.
  Expand = 64,
  // in: logits[N, V], targets[N] (I64) -> out[] (scalar):
  // mean over N of logsumexp(logits[n]) - logits[n, targets[n]].
  CrossEntropy = 70,

  // --- Training: backward kernels and the optimizer --------------------
  // in: dy[..., D], ids[...] (I64/I32) -> out[V, D] (V from out's shape):
  // out = 0; out[ids[n], :] += dy[n, :] for every position n.
  EmbeddingGrad = 80,
  // in: x[..., D], w[D], dy[..., D] -> dx[..., D], dw[D]. floats: [eps].
  // With r = 1/sqrt(mean(x^2) + eps) and n = x r per row:
  // dw = sum over rows of dy n;  dx = r (dy w - n mean(dy w n)).
  RmsNormGrad = 81,
  // in: x[..., D], w[D], dy -> dx, dw[D], db[D]. floats: [eps].
  // With xhat = (x - mean) r, r = 1/sqrt(var + eps), g = dy w per row:
  // dx = r (g - mean(g) - xhat mean(g xhat)); dw = sum dy xhat; db = sum dy.
  LayerNormGrad = 82,
  // in: q[B,Hq,T,D], k[B,Hkv,S,D], v[B,Hkv,S,Dv], o[B,Hq,T,Dv], lse[B,Hq,T],
  // dy[B,Hq,T,Dv] -> dq, dk, dv (shapes of q, k, v), where o and lse are the
  // Attention outputs of the same q, k, v. ints: [causal] or [causal,
  // bf16_operands] as for Attention; floats: [scale]. Every operand but lse
  // may be bf16 storage of the f32 computation; lse has the computation's
  // dtype, as Attention writes it.
  // P = exp(scale q k^T + mask - lse) (the forward's probabilities, from
  // its saved statistics; a row with lse = +inf has P = 0);
  // delta = rowsum(dy o) (equal to rowsum(dP P), without a pass over the
  // keys); dv = P^T dy; dP = dy v^T; dS = P (dP - delta); dq = scale dS k;
  // dk = scale dS^T q. Query heads sharing a kv head sum into its dk, dv.
  AttentionGrad = 83,
  // in: dy[..., T, D], cos, sin (broadcastable to dy) -> dx:
  // dx = dy cos + rotate_half^T(dy sin), rotate_half^T(z) =
  // concat(z[..., D/2:], -z[..., :D/2]).
  RotaryGrad = 84,
  // in: x, dy -> dx = f'(x) dy. ints: [kind]: 0 silu, 1 gelu (erf),
  // 2 gelu (tanh approximation), 3 relu (f' = 1 where x > 0, else 0).
  ActivationGrad = 85,
  // in: y (softmax output), dy -> dx = y (dy - sum(dy y)) along ints[0].
  SoftmaxGrad = 86,
  // in: logits[N, V], targets[N] (I64/I32), dloss[] -> dlogits[N, V]:
  // (softmax(logits[n]) - onehot(targets[n])) dloss / N. With a second
  // output loss[] (f32, or f64 for f64 logits) it also writes CrossEntropy's
  // loss of the same logits: one pass of row statistics serves both
  // (loom.cross_entropy_with_grad), with the bits of the two instructions.
  CrossEntropyGrad = 87,
  // in: dy -> out: zeros of out's shape with dy written at the slice
  // positions. ints: [start_0, step_0, ...] as for Slice, per dim of out.
  SliceGrad = 88,
  // in: p, g, m, v, lr[], step[] and optionally scale[] (all F32)
  // -> p', m', v'. Elementwise, so p', m', v' may share p's, m's, v's
  // bytes (an InPlaceUpdate). With scale, g stands for the f32 product
  // g * scale, rounded once before anything else (gradient clipping; the
  // same as a Mul writing the scaled gradient first).
  // floats: [beta1, beta2, eps, weight_decay]. PyTorch AdamW, t = step + 1:
  // p' = p (1 - lr wd); m' = b1 m + (1-b1) g; v' = b2 v + (1-b2) g^2;
  // p' -= lr / (1 - b1^t) * m' / (sqrt(v') / sqrt(1 - b2^t) + eps).
  // Optional outputs kept between runs (loom/runtime/RoundedCopies.h):
  // out[3], p' stored again (bf16 storage allowed); with ints = [1] (else
  // no ints) a last output amax[1, 1] (f32) = max |p'|, the maximum of the
  // magnitudes' bit patterns as for Fp8Scale.
  AdamW = 89,
  // in: gate, up, dy (same shape) -> dgate, dup of SwiGlu:
  // dup = dy silu(gate); dgate = dy up silu'(gate),
  // silu'(x) = s (1 + x (1 - s)), s = 1 / (1 + e^-x).
  SwiGluGrad = 90,

  // --- Collectives (SPMD; issue 5) ----------------------------------------
  // All three take ints: [kind, dim, pp, dp_replicate, dp_shard, cp, tp,
  // axes]: kind 0 sum, 1 mean (ignored by AllGather); dim the gathered or
  // scattered dim (-1 for AllReduce); the mesh axis sizes; and a bit mask
  // of the axes the group spans (bit 0 pp, 1 dp_replicate, 2 dp_shard,
  // 3 cp, 4 tp). Ranks are laid out row-major over (pp, dp_replicate,
  // dp_shard, cp, tp); the group of a rank is the ranks that agree with it
  // on every axis outside the mask, ordered by rank. The executor running
  // the program must belong to a world of exactly the mesh's size. F32.
  // Reductions add the group's values in group order in double precision
  // and round once, so every rank gets bit-identical results.
  // in: x -> out (x's shape): sum or mean over the group.
  AllReduce = 100,
  // in: x -> out: the group's x concatenated along dim in group order
  // (out dim = x dim * group size).
  AllGather = 101,
  // in: x -> out: slice g (the rank's place in the group) of the group's
  // sum or mean, along dim (x dim = out dim * group size).
  ReduceScatter = 102,
  // in: x -> out (x's shape): x is the group's n chunks along dim (x dim =
  // n * chunk); out's chunk g is chunk `me` (the rank's place in the group)
  // of member g's x, in group order. MPI's all-to-all, for layouts that
  // move a sharded dim to another (context and expert parallelism); ints
  // as above, kind ignored.
  AllToAll = 103,

  // --- Sequence, context and vocabulary parallelism (issue 18) -----------
  // in: x -> out (x's shape): the x of the group member `shift` places
  // before this rank (member (g - shift) mod n, g the rank's place in its
  // group): the ring pass of ring attention. ints: [0, shift, pp,
  // dp_replicate, dp_shard, cp, tp, axes], the collectives' layout with the
  // dim slot holding the shift. F32. Runs through the communicator.
  CollectivePermute = 110,
  // in: x -> out: slice g (the rank's place in its group) of dim, out dim =
  // x dim / group size. No communication: x is the same on every rank of
  // the group (a constant table), so each rank reads its own rows. ints:
  // [0, dim, pp, dp_replicate, dp_shard, cp, tp, axes] as for the
  // collectives. Any dtype. The executor must know its rank (a world of
  // the mesh's size, like a collective).
  ShardSlice = 111,
  // in: table[Vl, D], ids[...] (I64/I32), first[] (one I64/I32 element)
  // -> out[..., D]: row ids - first of the table where 0 <= ids - first <
  // Vl, else a row of zeros (a vocabulary-parallel rank's share of the
  // embedding; the shares sum to the full lookup). ints: [V], the whole
  // vocabulary: an id outside [0, V) is a data error, as for Embedding.
  VocabShardEmbedding = 112,
  // in: dy[..., D], ids[...], first[] -> out[Vl, D] (Vl from out's shape):
  // out = 0; out[ids[n] - first, :] += dy[n, :] for the ids in range, in
  // position order.
  VocabShardEmbeddingGrad = 113,
  // in: logits[N, Vl], targets[N] (I64/I32), first[], shift[N] -> sumexp[N],
  // target[N] (logits' dtype): sumexp[n] = sum_v exp(logits[n, v] -
  // shift[n]); target[n] = logits[n, targets[n] - first] - shift[n] when
  // 0 <= targets[n] - first < Vl, else 0. One vocabulary shard's part of
  // cross-entropy: summed over the shards, log(sumexp) - target is row n's
  // loss when shift is the row's maximum over the whole vocabulary. ints:
  // [V]: a target outside [0, V) is a data error, as for CrossEntropy.
  VocabShardCrossEntropy = 114,
  // in: logits[N, Vl], targets, first, shift[N], dsumexp[N], dtarget[N]
  // -> dlogits[N, Vl] = dsumexp[n] exp(logits[n, v] - shift[n]) +
  // (v == targets[n] - first ? dtarget[n] : 0).
  VocabShardCrossEntropyGrad = 115,

  // --- fp8 training (issue 17): dynamic scaling and scaled GEMMs ---------
  // Every operand is rank 2. Formats, rounding and the scale formula are
  // loom/runtime/Fp8.h's.
  // in: x[R, C] (f32 or bf16) -> scale, inverse (f32, equal shapes): the
  // dynamic scale of x and its reciprocal (each rounded once to f32), one
  // per tensor ([1, 1]), per row ([R, 1]: the amax runs along dim 1) or per
  // column ([1, C]: along dim 0). ints: [format (0 e4m3, 1 e5m2),
  // power_of_two (0/1)]. scale = fmax / max(amax, 1e-12), amax = max |x|
  // over the scale's group (NaN if any element is NaN).
  Fp8Scale = 120,
  // in: x[R, C] (f32 or bf16), scale (f32, [1, 1], [R, 1] or [1, C])
  // -> q and/or its transpose (F8E4M3 or F8E5M2): q = fp8(f32(x * scale)),
  // the product rounded to f32, then to the format (nearest even,
  // saturating). ints: [layout]: 0 one output q[R, C]; 1 one output
  // q^T[C, R]; 2 two outputs q[R, C] and q^T[C, R] (one pass over x for
  // both of the layouts a linear layer's forward and backward GEMMs read).
  Fp8Cast = 121,
  // in: a, b (fp8), da, db (f32) -> out[M, N] (f32 or bf16; or [..., N]
  // whose leading dims fold to M, the same bytes):
  // out[m, n] = (sum_k op(a)[m, k] op(b)[k, n]) * da[m] * db[n], the sum in
  // f32 (every product of two fp8 values is exact in f32), then the two
  // f32 multiplications in that order; a bf16 out is that f32 value
  // rounded once. a is [M, K] (or [K, M] with transA), b [K, N] (or [N, K]
  // with transB). da and db are dequantization factors (Fp8Scale's
  // inverse) in the stored operand's layout with the contracting dim of
  // size 1: da [1, 1] or [M, 1] ([1, M] with transA), db [1, 1] or [1, N]
  // ([N, 1] with transB). ints: [transA, transB, fast_accum]: fast_accum
  // lets a backend accumulate in its faster, less precise way (Hopper's
  // fp8 tensor cores without periodic promotion); the CPU ignores it.
  // cuBLASLt runs only transA = 0, transB = 1 ("TN") with K and N
  // multiples of 16; codegen emits only that form.
  ScaledMatMul = 122,
  // in: x[R, C] (f32 or bf16) -> amax[1, 1] (f32): max |x| (NaN if any
  // element is NaN), the maximum of the magnitudes' bit patterns as for
  // Fp8Scale, whose [1, 1] form then turns it into x's scale bit for bit.
  // Codegen folds it into the instruction that writes x where that one can
  // carry amax outputs (loom/runtime/Fp8Amax.h); else it runs on its own.
  Fp8Amax = 123,
};

struct Program;
struct Instr;

/// bf16 storage of f32 computations (autocast). Codegen folds autocast's
/// f32 <-> bf16 casts into their neighbours, so some instructions that
/// compute in f32 read or write bf16 buffers directly:
///  - a bf16 input is widened to f32 as it is read (exact);
///  - a bf16 output receives the f32 result the instruction would have
///    stored, rounded to nearest even (what Cast does), once per element.
/// The result is bit-identical to a Cast before or after the f32
/// instruction. Allowed only in these slots, with every other float operand
/// of the instruction f32:
///   Add Sub Mul Div Pow Max Min: inputs 0, 1 and the output;
///   the unary ops (Neg ... Log): input and output;
///   ActivationGrad: x, dy and dx;
///   SwiGlu, SwiGluGrad: every operand;
///   Transpose: input and output (a transposing cast);
///   Rotary, RotaryGrad: x (dy) and the output (the tables stay f32);
///   RmsNorm: x and y (the weight stays f32);
///   AddRmsNorm: a, b and y (the sum and the weight stay f32);
///   RmsNormGrad: x and dy (inputs 0, 2), dx (output 0) and dx's rounded
///     copy (output 2, storesRoundedDx); w and dw stay f32;
///   LayerNorm: x and y (w and b stay f32);
///   LayerNormGrad: x and dy (inputs 0, 2), dx (output 0) and dx's rounded
///     copy (output 3); w, dw and db stay f32;
///   SumSquares: x (the sum stays f32);
///   GlobalSumSquares: every input (the sum stays f32);
///   Reduce: x (the result stays f32);
///   AdamW: g (input 1; parameters, moments and scalars stay f32);
///   Attention: q, k, v and o (lse stays f32);
///   AttentionGrad: q, k, v, o, dy and dq, dk, dv (lse stays f32).
/// MatMul's bf16 operands and Cast follow their own rules above.
bool bf16StorageAllowed(OpCode op, bool output, size_t slot);
/// True when some slot of `I` that bf16StorageAllowed names holds bf16:
/// the instruction computes in f32 (validate() checked the other operands).
bool usesBf16Storage(const Program &p, const Instr &I);
/// A norm gradient (RmsNormGrad, LayerNormGrad) with ints = {1} stores dx
/// twice: f32 in output 0, for the residual stream's sum, and rounded to
/// bf16 (Cast's rounding) in one more output after its weight gradients,
/// for the GEMMs of the layer below, which would otherwise read dx back to
/// round it (codegen's foldNormGradRounding). Such an instruction carries
/// no fused amax outputs.
bool storesRoundedDx(const Instr &I);

/// Number of int attributes of a collective instruction.
constexpr size_t kCollectiveInts = 8;
/// Mesh axes in rank-layout order, as the collectives' axis bits number them.
constexpr int kMeshAxes = 5;

const char *opcodeName(OpCode op);

struct Instr {
  OpCode op = OpCode::Add;
  std::vector<uint32_t> in;  // buffer ids
  std::vector<uint32_t> out; // buffer ids
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

/// An output that is the next value of an input and shares its arena bytes
/// (a training step's parameters and optimizer state, updated in place by
/// AdamW). After a run the input buffer holds the new value, so a caller
/// that runs the program again may skip setting that input: the state
/// stays on the device between runs.
struct InPlaceUpdate {
  uint32_t output = 0; // buffer id of an Output
  uint32_t input = 0;  // buffer id of the Input it updates
};

/// A buffer that names another buffer's bytes. Both are Temp buffers, a
/// base is never itself a view, and the base stays live while any of its
/// views is read or written. Two kinds:
///  - a reshape (column < 0): the base's bytes under the view's own shape
///    (same dtype, byte count and arena offset). No instruction writes it.
///  - a column block (column >= 0): the base is [rows, W] (its leading
///    dims flattened), the view [rows, w] (its own leading dims, the same
///    rows), w <= W - column; view element (r, c) is base element
///    (r, column + c), so its rows are W apart (BufferDesc::rowPitch = W)
///    from offset = the base's + column elements. Sibling projections'
///    operands side by side, so that one GEMM reads them as one matrix
///    (codegen's joinSiblingInputGradients). Only the instruction slots
///    columnBlockSlot() names may read or write one.
struct BufferView {
  uint32_t view = 0;   // buffer id of the view
  uint32_t base = 0;   // buffer id whose bytes it names
  int64_t column = -1; // a column block's first column in its base; -1: a reshape
};

/// The bytes from a buffer's first element to the end of its last: its
/// byte count, or for a column block the span of its pitched rows.
uint64_t spanBytes(const BufferDesc &b);

/// Whether two arena buffers share a byte: their spans meet and, for two
/// column blocks of one pitch, their columns do (constants never do).
bool buffersOverlap(const BufferDesc &a, const BufferDesc &b);

/// Whether operand `slot` of `I` (an output when `output`) may be a column
/// block: AdamW's rounded copy (out 3), SwiGluGrad's two outputs, a Cast's
/// result between f32 and bf16 (a weight's rounding), and MatMul's A and B
/// (not a B whose column sums it also stores).
bool columnBlockSlot(const Program &p, const Instr &I, bool output, size_t slot);

struct Program {
  std::vector<BufferDesc> buffers;
  std::vector<uint8_t> constants; // blob for Constant buffers, 64-byte aligned
  uint64_t arenaBytes = 0;        // size of the arena for non-constants
  std::vector<Instr> instrs;      // executed in order
  std::vector<uint32_t> inputs;   // buffer ids of inputs, in calling order
  std::vector<uint32_t> outputs;  // buffer ids of outputs, in calling order
  std::vector<InPlaceUpdate> updates; // outputs that overwrite their input
  std::vector<BufferView> views;      // reshaped names of temporaries

  /// Checks internal consistency (ids in range, sizes, offsets inside the
  /// arena or constant blob, arity of each opcode). Returns an empty string
  /// when valid, else a one-line description of the first problem.
  std::string validate() const;
};

/// Whether MatMul's third input, of shape `third`, is an addend (it has the
/// result's shape, so rank 2 or more; validate() checks the rest) rather
/// than a bias vector.
inline bool isMatMulAddend(const std::vector<int64_t> &third) { return third.size() >= 2; }
/// True when MatMul `I` has an addend rather than a bias vector.
bool matMulAccumulates(const Program &p, const Instr &I);
/// True when MatMul `I` also stores the column sums of its B operand as a
/// second output (ints [transA, transB, 1]).
inline bool matMulSumsB(const Instr &I) { return I.ints.size() == 3 && I.out.size() == 2; }
/// What MatMul `I`'s third input is, for reports: "addend", "bias", or ""
/// when it has none (or `I` is no MatMul).
const char *matMulThirdInput(const Program &p, const Instr &I);

/// Per buffer id, the buffer whose bytes it names: the base for a view
/// (Program::views), the id itself otherwise. The views' ids must be in
/// range (validate() checks them first).
std::vector<uint32_t> viewBases(const Program &p);

} // namespace loom::rt

#endif // LOOM_RUNTIME_PROGRAM_H

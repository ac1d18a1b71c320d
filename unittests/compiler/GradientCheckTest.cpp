//===- GradientCheckTest.cpp - Every gradient rule vs finite differences --===//
//
// Part of loom, under the Apache License v2.0.
//
// For each op with a DifferentiableOpInterface rule, a small f64 function
// f(x...) is differentiated by the same reverse-mode code BuildTrainStep
// uses, compiled to a runtime program and run on the CPU backend. The
// scalar checked is L = sum(f(x) * r) with a fixed random r, so the whole
// vector-Jacobian product is tested, not only its diagonal. Each analytic
// dL/dx is compared with central differences (L(x + h e_k) - L(x - h e_k))
// / 2h, evaluated in f64 by the compiled forward program.
//===----------------------------------------------------------------------===//
#include "codegen/LowerToProgram.h"
#include "ir/LoomDialect.h"
#include "ir/LoomOps.h"
#include "loom/runtime/Executor.h"
#include "passes/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;

namespace {

struct Case {
  std::string name;
  std::string body; // func.func @f(...) -> tensor<...> with f64 tensors
  double lo = -1, hi = 1; // range of the random inputs
  double h = 1e-5;        // finite-difference step
  double tol = 1e-6;      // bound on relative L2 error of each gradient
};

/// Builds, from @f, @loss(x...) -> L and @grad(x...) -> (L, dL/dx...).
struct Harness {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  std::mt19937_64 rng{1234};

  Harness() {
    ctx.loadDialect<func::FuncDialect, loom::LoomDialect>();
  }

  Value weighted(OpBuilder &b, Location loc, Value y) {
    auto t = cast<RankedTensorType>(y.getType());
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> r(t.getNumElements());
    for (double &v : r) v = u(rng);
    Value rc = b.create<loom::ConstantOp>(loc, DenseElementsAttr::get(t, ArrayRef<double>(r)),
                                          StringAttr(), loom::ParamAttr());
    Value prod = b.create<loom::MulOp>(loc, y, rc);
    if (t.getRank() == 0)
      return prod;
    SmallVector<int64_t> all;
    for (int64_t d = 0; d < t.getRank(); ++d) all.push_back(d);
    return b.create<loom::ReduceOp>(loc, prod, loom::ReduceKind::sum, all, false);
  }

  /// Clones @f's body into a new function named `name` returning L (and,
  /// when `withGrads`, the gradients of L with respect to every argument).
  func::FuncOp build(func::FuncOp f, StringRef name, bool withGrads, uint64_t seed) {
    rng.seed(seed); // both functions draw the same r
    OpBuilder b(&ctx);
    b.setInsertionPointToEnd(module->getBody());
    Location loc = f.getLoc();
    auto fn = b.create<func::FuncOp>(loc, name, b.getFunctionType(f.getArgumentTypes(), {}));
    Block *body = fn.addEntryBlock();
    b.setInsertionPointToEnd(body);
    IRMapping map;
    for (auto [a, na] : llvm::zip(f.getArguments(), body->getArguments())) map.map(a, na);
    Value y;
    for (Operation &op : f.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        y = map.lookup(ret.getOperand(0));
        continue;
      }
      b.clone(op, map);
    }
    Value L = weighted(b, loc, y);
    SmallVector<Value> results = {L};
    if (withGrads) {
      SmallVector<Operation *> ops;
      for (Operation &op : *body) ops.push_back(&op);
      auto scalarT = RankedTensorType::get({}, b.getF64Type());
      Value seedV = b.create<loom::ConstantOp>(loc, DenseElementsAttr::get(scalarT, 1.0),
                                               StringAttr(), loom::ParamAttr());
      llvm::DenseMap<Value, Value> grads;
      SmallVector<Value> wrt(body->getArguments().begin(), body->getArguments().end());
      EXPECT_TRUE(succeeded(loom::buildReverseMode(b, ops, wrt, L, seedV, grads)));
      for (Value a : wrt) {
        Value g = grads.lookup(a);
        if (!g) {
          auto t = cast<RankedTensorType>(a.getType());
          g = b.create<loom::ConstantOp>(loc, DenseElementsAttr::get(t, 0.0), StringAttr(),
                                         loom::ParamAttr());
        }
        results.push_back(g);
      }
    }
    b.create<func::ReturnOp>(loc, results);
    SmallVector<Type> types;
    for (Value v : results) types.push_back(v.getType());
    fn.setFunctionType(b.getFunctionType(f.getArgumentTypes(), types));
    return fn;
  }
};

std::unique_ptr<loom::rt::Executor> compile(func::FuncOp fn, std::string &err) {
  auto program = std::make_shared<loom::rt::Program>();
  if (!loom::lowerToProgram(fn, *program, err))
    return nullptr;
  return loom::rt::createExecutor(program, "cpu", 2, err);
}

double runLoss(loom::rt::Executor &e, std::vector<std::vector<double>> &inputs) {
  std::string err;
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(e.setInput(i, inputs[i].data(), inputs[i].size() * 8, err)) << err;
  EXPECT_TRUE(e.run(err)) << err;
  double L = NAN;
  EXPECT_TRUE(e.getOutput(0, &L, 8, err)) << err;
  return L;
}

void check(const Case &c) {
  SCOPED_TRACE(c.name);
  Harness h;
  h.module = parseSourceString<ModuleOp>(c.body, &h.ctx);
  ASSERT_TRUE(h.module) << "cannot parse case " << c.name;
  auto f = h.module->lookupSymbol<func::FuncOp>("f");
  ASSERT_TRUE(f);
  func::FuncOp lossFn = h.build(f, "loss", false, 99);
  func::FuncOp gradFn = h.build(f, "grad", true, 99);
  std::string err;
  auto lossExec = compile(lossFn, err);
  ASSERT_TRUE(lossExec) << err;
  auto gradExec = compile(gradFn, err);
  ASSERT_TRUE(gradExec) << err;

  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(c.lo, c.hi);
  std::vector<std::vector<double>> x;
  for (Type t : f.getArgumentTypes()) {
    x.emplace_back(cast<RankedTensorType>(t).getNumElements());
    for (double &v : x.back()) v = u(rng);
  }
  runLoss(*gradExec, x);
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> analytic(x[i].size(), NAN);
    ASSERT_TRUE(gradExec->getOutput(1 + i, analytic.data(), analytic.size() * 8, err)) << err;
    double d2 = 0, n2 = 0;
    for (size_t k = 0; k < x[i].size(); ++k) {
      double keep = x[i][k];
      x[i][k] = keep + c.h;
      double up = runLoss(*lossExec, x);
      x[i][k] = keep - c.h;
      double down = runLoss(*lossExec, x);
      x[i][k] = keep;
      double numeric = (up - down) / (2 * c.h);
      ASSERT_TRUE(std::isfinite(analytic[k])) << "argument " << i << " element " << k;
      d2 += (analytic[k] - numeric) * (analytic[k] - numeric);
      n2 += numeric * numeric;
    }
    double rel = std::sqrt(d2 / std::max(n2, 1e-30));
    EXPECT_LE(rel, c.tol) << "argument " << i << ": relative L2 error " << rel;
    EXPECT_GT(n2, 0) << "argument " << i << " has a zero gradient: the case checks nothing";
  }
}

std::string fn(const std::string &args, const std::string &result, const std::string &body) {
  return "func.func @f(" + args + ") -> " + result + " {\n" + body + "\n}\n";
}

TEST(GradientCheck, Unary) {
  const std::string t = "tensor<3x4xf64>";
  for (const char *op : {"neg", "exp", "tanh", "sigmoid", "silu", "cos", "sin", "erf", "softplus"})
    check({std::string(op), fn("%x: " + t, t, std::string("%y = loom.") + op + " %x : " + t +
                                                   "\nreturn %y : " + t)});
  // Positive domains.
  for (const char *op : {"sqrt", "rsqrt", "reciprocal", "log"})
    check({std::string(op),
           fn("%x: " + t, t, std::string("%y = loom.") + op + " %x : " + t + "\nreturn %y : " + t),
           0.5, 1.5});
  // Both sides of relu (the inputs land off its kink at 0).
  check({"relu", fn("%x: " + t, t, "%y = loom.relu %x : " + t + "\nreturn %y : " + t), -1.5, 1.5});
  for (const char *approx : {"erf", "tanh"})
    check({std::string("gelu_") + approx,
           fn("%x: " + t, t, std::string("%y = loom.gelu %x ") + approx + " : " + t +
                                 "\nreturn %y : " + t),
           -2, 2});
}

TEST(GradientCheck, SwiGlu) {
  const std::string t = "tensor<3x4xf64>";
  check({"swiglu", fn("%g: " + t + ", %u: " + t, t,
                      "%y = loom.swiglu %g, %u : " + t + "\nreturn %y : " + t),
         -3, 3});
}

TEST(GradientCheck, BinaryWithBroadcasting) {
  // [2,3,4] op [3,1]: both operands' gradients are sums over stretched dims.
  // max and min have no gradient rule yet (no exported model uses them on
  // a differentiated path); BuildTrainStep reports them as such.
  for (const char *op : {"add", "sub", "mul", "div"})
    check({std::string(op),
           fn("%a: tensor<2x3x4xf64>, %b: tensor<3x1xf64>", "tensor<2x3x4xf64>",
              std::string("%y = loom.") + op +
                  " %a, %b : tensor<2x3x4xf64>, tensor<3x1xf64>\nreturn %y : tensor<2x3x4xf64>"),
           0.5, 1.5});
}

TEST(GradientCheck, PowWithConstantExponent) {
  // The rule covers x^c with a constant c (what exporters emit for x^2 in
  // norms and x^3 in tanh-gelu); a tensor exponent is refused by the rule.
  check({"pow", fn("%x: tensor<2x3xf64>", "tensor<2x3xf64>",
                   "%c = loom.constant dense<2.5> : tensor<f64>\n"
                   "%y = loom.pow %x, %c : tensor<2x3xf64>, tensor<f64>\nreturn %y : tensor<2x3xf64>"),
         0.5, 1.5});
}

TEST(GradientCheck, WhereAndCast) {
  check({"where",
         fn("%a: tensor<2x3xf64>, %b: tensor<3xf64>", "tensor<2x3xf64>",
            "%c = loom.constant dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>\n"
            "%y = loom.where %c, %a, %b : tensor<2x3xi1>, tensor<2x3xf64>, tensor<3xf64>\n"
            "return %y : tensor<2x3xf64>")});
  // f64 -> f32 -> f64 rounds to float: differences need a step far above
  // float's resolution, and the bound allows its rounding (~1e-7 / h).
  check({"cast",
         fn("%x: tensor<5xf64>", "tensor<5xf64>",
            "%a = loom.cast %x : tensor<5xf64> -> tensor<5xf32>\n"
            "%b = loom.exp %a : tensor<5xf32>\n"
            "%y = loom.cast %b : tensor<5xf32> -> tensor<5xf64>\nreturn %y : tensor<5xf64>"),
         -1, 1, 1e-2, 1e-3});
}

TEST(GradientCheck, Matmul) {
  check({"weight", fn("%a: tensor<2x3x4xf64>, %w: tensor<4x5xf64>", "tensor<2x3x5xf64>",
                      "%y = loom.matmul %a, %w : tensor<2x3x4xf64>, tensor<4x5xf64>\n"
                      "return %y : tensor<2x3x5xf64>")});
  check({"weight_transposed",
         fn("%a: tensor<2x3x4xf64>, %w: tensor<5x4xf64>", "tensor<2x3x5xf64>",
            "%y = loom.matmul %a, %w {transpose_rhs = true} : tensor<2x3x4xf64>, tensor<5x4xf64>\n"
            "return %y : tensor<2x3x5xf64>")});
  check({"batched", fn("%a: tensor<2x3x4xf64>, %b: tensor<2x4x5xf64>", "tensor<2x3x5xf64>",
                       "%y = loom.matmul %a, %b : tensor<2x3x4xf64>, tensor<2x4x5xf64>\n"
                       "return %y : tensor<2x3x5xf64>")});
  check({"both_transposed",
         fn("%a: tensor<4x3xf64>, %b: tensor<5x4xf64>", "tensor<3x5xf64>",
            "%y = loom.matmul %a, %b {transpose_lhs = true, transpose_rhs = true} : "
            "tensor<4x3xf64>, tensor<5x4xf64>\nreturn %y : tensor<3x5xf64>")});
  check({"lhs_transposed_batched",
         fn("%a: tensor<2x4x3xf64>, %b: tensor<2x4x5xf64>", "tensor<2x3x5xf64>",
            "%y = loom.matmul %a, %b {transpose_lhs = true} : tensor<2x4x3xf64>, tensor<2x4x5xf64>\n"
            "return %y : tensor<2x3x5xf64>")});
}

TEST(GradientCheck, ReduceAndSoftmax) {
  check({"sum", fn("%x: tensor<2x3x4xf64>", "tensor<2x1x4xf64>",
                   "%y = loom.reduce sum %x {axes = array<i64: 1>, keepdim = true} : tensor<2x3x4xf64>\n"
                   "return %y : tensor<2x1x4xf64>")});
  check({"mean", fn("%x: tensor<2x3x4xf64>", "tensor<3xf64>",
                    "%y = loom.reduce mean %x {axes = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xf64>\n"
                    "return %y : tensor<3xf64>")});
  check({"softmax", fn("%x: tensor<3x5xf64>", "tensor<3x5xf64>",
                       "%y = loom.softmax %x {axis = 1 : i64} : tensor<3x5xf64>\n"
                       "return %y : tensor<3x5xf64>"),
         -2, 2});
  check({"softmax_axis0", fn("%x: tensor<3x5xf64>", "tensor<3x5xf64>",
                             "%y = loom.softmax %x {axis = 0 : i64} : tensor<3x5xf64>\n"
                             "return %y : tensor<3x5xf64>"),
         -2, 2});
}

TEST(GradientCheck, Norms) {
  check({"rms_norm", fn("%x: tensor<2x3x8xf64>, %w: tensor<8xf64>", "tensor<2x3x8xf64>",
                        "%y = loom.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : tensor<2x3x8xf64>, tensor<8xf64>\n"
                        "return %y : tensor<2x3x8xf64>")});
  check({"layer_norm", fn("%x: tensor<2x3x8xf64>, %w: tensor<8xf64>, %b: tensor<8xf64>",
                          "tensor<2x3x8xf64>",
                          "%y = loom.layer_norm %x, %w, %b {epsilon = 1.0e-5 : f64} : "
                          "tensor<2x3x8xf64>, tensor<8xf64>, tensor<8xf64>\nreturn %y : tensor<2x3x8xf64>")});
  check({"layer_norm_no_bias", fn("%x: tensor<4x6xf64>, %w: tensor<6xf64>", "tensor<4x6xf64>",
                                  "%y = loom.layer_norm %x, %w {epsilon = 1.0e-5 : f64} : "
                                  "tensor<4x6xf64>, tensor<6xf64>\nreturn %y : tensor<4x6xf64>")});
}

TEST(GradientCheck, TransformerOps) {
  check({"embedding", fn("%t: tensor<7x4xf64>", "tensor<2x3x4xf64>",
                         "%ids = loom.constant dense<[[1, 3, 1], [6, 0, 3]]> : tensor<2x3xi64>\n"
                         "%y = loom.embedding %t, %ids : tensor<7x4xf64>, tensor<2x3xi64>\n"
                         "return %y : tensor<2x3x4xf64>")});
  // Rotary tables are frozen by design (no gradient): they are constants.
  check({"rotary", fn("%x: tensor<1x2x3x4xf64>", "tensor<1x2x3x4xf64>",
                      "%c = loom.constant dense<[[0.9, 0.8, 0.7, 0.6], [0.5, 0.4, 0.3, 0.2], [0.1, -0.2, -0.3, 0.4]]> : tensor<3x4xf64>\n"
                      "%s = loom.constant dense<[[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, -0.7, 0.8], [0.9, 0.3, 0.2, -0.1]]> : tensor<3x4xf64>\n"
                      "%y = loom.rotary %x, %c, %s : tensor<1x2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>\n"
                      "return %y : tensor<1x2x3x4xf64>")});
  // The backward reads the forward's output and f64 logsumexp (the
  // statistics of an f64 run are f64).
  check({"attention_gqa_causal",
         fn("%q: tensor<1x4x3x2xf64>, %k: tensor<1x2x3x2xf64>, %v: tensor<1x2x3x2xf64>",
            "tensor<1x4x3x2xf64>",
            "%y, %lse = loom.attention %q, %k, %v {causal = true, scale = 0.7 : f64} : "
            "tensor<1x4x3x2xf64>, tensor<1x2x3x2xf64>, tensor<1x2x3x2xf64>\n"
            "return %y : tensor<1x4x3x2xf64>"),
         -1.5, 1.5});
  check({"attention_full",
         fn("%q: tensor<2x2x3x4xf64>, %k: tensor<2x2x5x4xf64>, %v: tensor<2x2x5x4xf64>",
            "tensor<2x2x3x4xf64>",
            "%y, %lse = loom.attention %q, %k, %v {causal = false, scale = 0.5 : f64} : "
            "tensor<2x2x3x4xf64>, tensor<2x2x5x4xf64>, tensor<2x2x5x4xf64>\n"
            "return %y : tensor<2x2x3x4xf64>"),
         -1.5, 1.5});
  // A sliding window of 3 over 6 positions and a softcap of 1 (with
  // scores of a few units, the cap's tanh bends them).
  check({"attention_window_softcap",
         fn("%q: tensor<1x4x6x2xf64>, %k: tensor<1x2x6x2xf64>, %v: tensor<1x2x6x2xf64>",
            "tensor<1x4x6x2xf64>",
            "%y, %lse = loom.attention %q, %k, %v {causal = true, scale = 0.9 : f64, window = 3, "
            "softcap = 1.0 : f64} : tensor<1x4x6x2xf64>, tensor<1x2x6x2xf64>, tensor<1x2x6x2xf64>\n"
            "return %y : tensor<1x4x6x2xf64>"),
         -1.5, 1.5});
  // cross_entropy's result is f32 by definition; its gradient kernel is
  // checked against finite differences in unittests/runtime.
}

TEST(GradientCheck, VocabularyShards) {
  // One tp rank's share of the vocabulary (rows 2..4 of a 7-word table):
  // ids outside its range read zeros and get no gradient.
  check({"vocab_shard_embedding",
         fn("%t: tensor<3x4xf64>", "tensor<2x3x4xf64>",
            "%ids = loom.constant dense<[[1, 3, 2], [6, 4, 3]]> : tensor<2x3xi64>\n"
            "%first = loom.constant dense<2> : tensor<1xi64>\n"
            "%y = loom.vocab_shard_embedding %t, %ids, %first {vocab = 7 : i64} : tensor<3x4xf64>, tensor<2x3xi64>, "
            "tensor<1xi64>\nreturn %y : tensor<2x3x4xf64>")});
  // log(sum of exponentials) - target logit of columns 3..7: rows whose
  // target lies elsewhere only have the first term. The shift is any
  // per-row constant (it cancels), so not necessarily the maximum.
  check({"vocab_shard_cross_entropy",
         fn("%x: tensor<4x5xf64>", "tensor<4xf64>",
            "%t = loom.constant dense<[3, 0, 7, 5]> : tensor<4xi64>\n"
            "%first = loom.constant dense<3> : tensor<1xi64>\n"
            "%m = loom.constant dense<[0.5, -0.25, 1.0, 0.0]> : tensor<4xf64>\n"
            "%s, %p = loom.vocab_shard_cross_entropy %x, %t, %first, %m {vocab = 9 : i64} : tensor<4x5xf64>, "
            "tensor<4xi64>, tensor<1xi64>, tensor<4xf64>\n"
            "%l = loom.log %s : tensor<4xf64>\n"
            "%y = loom.sub %l, %p : tensor<4xf64>, tensor<4xf64>\nreturn %y : tensor<4xf64>"),
         -2, 2});
}

TEST(GradientCheck, DataMovement) {
  check({"reshape", fn("%x: tensor<2x6xf64>", "tensor<3x4xf64>",
                       "%y = loom.reshape %x : tensor<2x6xf64> -> tensor<3x4xf64>\n"
                       "%z = loom.mul %y, %y : tensor<3x4xf64>, tensor<3x4xf64>\n"
                       "return %z : tensor<3x4xf64>")});
  check({"expand", fn("%x: tensor<3x1xf64>", "tensor<2x3x4xf64>",
                      "%y = loom.expand %x : tensor<3x1xf64> -> tensor<2x3x4xf64>\n"
                      "return %y : tensor<2x3x4xf64>")});
  check({"transpose", fn("%x: tensor<2x3x4xf64>", "tensor<4x2x3xf64>",
                         "%y = loom.transpose %x [2, 0, 1] : tensor<2x3x4xf64>\n"
                         "return %y : tensor<4x2x3xf64>")});
  check({"slice", fn("%x: tensor<4x6xf64>", "tensor<2x3xf64>",
                     "%y = loom.slice %x {starts = array<i64: 1, 5>, sizes = array<i64: 2, 3>, "
                     "steps = array<i64: 2, -2>} : tensor<4x6xf64>\nreturn %y : tensor<2x3xf64>")});
  check({"concat", fn("%a: tensor<2x3xf64>, %b: tensor<2x2xf64>", "tensor<2x5xf64>",
                      "%y = loom.concat %a, %b {axis = 1 : i64} : tensor<2x3xf64>, tensor<2x2xf64>\n"
                      "return %y : tensor<2x5xf64>")});
  check({"split", fn("%x: tensor<2x5xf64>", "tensor<2x2xf64>",
                     "%p:2 = loom.split %x {axis = 1 : i64, sizes = array<i64: 2, 3>} : tensor<2x5xf64>\n"
                     "%s = loom.slice %p#1 {starts = array<i64: 0, 0>, sizes = array<i64: 2, 2>, "
                     "steps = array<i64: 1, 1>} : tensor<2x3xf64>\n"
                     "%y = loom.mul %p#0, %s : tensor<2x2xf64>, tensor<2x2xf64>\n"
                     "return %y : tensor<2x2xf64>")});
}

} // namespace

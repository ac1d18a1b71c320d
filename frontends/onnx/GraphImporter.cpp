//===- GraphImporter.cpp --------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"
#include "frontends/onnx/ConstantFolder.h"
#include "frontends/onnx/NodeAttributes.h"
#include "frontends/onnx/ShapeRules.h"
#include "frontends/onnx/TensorData.h"
#include "ir/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

using namespace mlir;

namespace loom::onnx_import {

Type elementTypeFor(MLIRContext *ctx, int32_t t) {
  Builder b(ctx);
  switch (t) {
  case 1: return b.getF32Type();
  case 11: return b.getF64Type();
  case 16: return b.getBF16Type();
  case 7: return b.getI64Type();
  case 6: return b.getI32Type();
  case 9: return b.getI1Type();
  default: return {};
  }
}

Type GraphImporter::elementType(int32_t onnxType) const {
  Type t = elementTypeFor(b.getContext(), onnxType);
  if (weightsAsShapes && t && t.isBF16())
    return b.getF32Type();
  return t;
}

void GraphImporter::fail(const std::string &msg) const {
  throw ImportError{curNode ? describeNode(*curNode) + ": " + msg : msg};
}

GraphImporter::Entry &GraphImporter::entry(const std::string &name) {
  return entries[name];
}

void GraphImporter::addInitializer(const onnx::TensorProto &t) {
  Entry &e = entry(t.name());
  e.init = &t;
  std::vector<int64_t> shape;
  std::string err;
  if (!tensorShape(t, shape, err))
    throw ImportError{err};
  // A float initializer with two or more non-trivial dims is a weight: it
  // stays a named constant (a future trainable parameter) and is never
  // folded into something else. Vectors such as rotary inverse frequencies,
  // even when stored as [1, D/2, 1], are folded like any known value.
  int nonTrivial = 0;
  for (int64_t d : shape)
    nonTrivial += d > 1;
  // torch.onnx's signature tells buffers apart: a sin/cos table kept as a
  // buffer (GPT-J) is a known value however many dims it has.
  e.weight = isFloatType(ElemType(t.data_type())) && nonTrivial >= 2 &&
             !torchInfo.holdsOnlyBuffers(t.name());
}

const HostTensor *GraphImporter::knownValue(const std::string &name) {
  auto it = entries.find(name);
  if (it == entries.end())
    return nullptr;
  Entry &e = it->second;
  if (!e.host && e.init && !e.weight) {
    HostTensor t;
    std::string err;
    bool external = e.init->data_location() == onnx::TensorProto::EXTERNAL;
    if (weightsAsShapes && external && isFloatType(ElemType(e.init->data_type())))
      // Float vectors in weight files (norm scales, biases) are values too:
      // shapes are what planning needs, so their bytes stay unread.
      t = HostTensor::zeros(ElemType(e.init->data_type()),
                            std::vector<int64_t>(e.init->dims().begin(), e.init->dims().end()));
    else if (!tensorFromProto(*e.init, modelDir, t, err))
      throw ImportError{err};
    if (weightsAsShapes && t.type == ElemType::BFloat16)
      t = t.castTo(ElemType::Float); // as elementType() retypes the IR
    e.host = std::move(t);
  }
  return e.host ? &*e.host : nullptr;
}

const HostTensor *GraphImporter::known(size_t k) {
  if (!hasInput(k))
    return nullptr;
  return knownValue(curNode->input(k));
}

bool GraphImporter::hasInput(size_t k) const {
  return int(k) < curNode->input_size() && !curNode->input(k).empty();
}

Value GraphImporter::convertedConstant(const HostTensor *h, ElemType type) {
  Value &v = converted[{h, type}];
  if (!v) {
    // At the top of the function, like other materialized constants, so
    // it dominates every later use.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(b.getInsertionBlock());
    v = constant(h->castTo(type));
  }
  return v;
}

Value GraphImporter::constant(const HostTensor &t, StringRef name) {
  Type elem = elementType(int32_t(t.type));
  if (!elem)
    fail(std::string("constant of unsupported element type ") +
         elemTypeName(int32_t(t.type)));
  auto type = RankedTensorType::get(t.shape, elem);
  DenseElementsAttr attr;
  if (elem.isF32()) {
    std::vector<float> v(t.f.begin(), t.f.end());
    attr = DenseElementsAttr::get(type, ArrayRef<float>(v));
  } else if (elem.isF64()) {
    attr = DenseElementsAttr::get(type, ArrayRef<double>(t.f));
  } else if (elem.isBF16()) {
    std::vector<APFloat> v;
    for (double x : t.f) {
      APFloat f(x);
      bool lost;
      f.convert(APFloat::BFloat(), APFloat::rmNearestTiesToEven, &lost);
      v.push_back(f);
    }
    attr = DenseElementsAttr::get(type, v);
  } else if (elem.isInteger(1)) {
    std::vector<bool> bits(t.i.begin(), t.i.end());
    SmallVector<bool> v(bits.begin(), bits.end());
    attr = DenseElementsAttr::get(type, ArrayRef<bool>(v));
  } else if (elem.isInteger(32)) {
    std::vector<int32_t> v(t.i.begin(), t.i.end());
    attr = DenseElementsAttr::get(type, ArrayRef<int32_t>(v));
  } else {
    attr = DenseElementsAttr::get(type, ArrayRef<int64_t>(t.i));
  }
  return b.create<ConstantOp>(curLoc, attr,
                              name.empty() ? StringAttr() : b.getStringAttr(name), ParamAttr());
}

Value GraphImporter::weightConstant(const onnx::TensorProto &t, const ParamUse *use) {
  Type elem = elementType(t.data_type());
  if (!elem)
    fail("initializer '" + t.name() + "' has unsupported element type " +
         elemTypeName(t.data_type()));
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  auto type = RankedTensorType::get(shape, elem);
  DenseElementsAttr attr;
  if (weightsAsShapes) {
    attr = DenseElementsAttr::get(type, b.getZeroAttr(elem));
  } else {
    std::vector<char> bytes;
    std::string err;
    if (!tensorBytes(t, modelDir, bytes, err))
      throw ImportError{err};
    attr = DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(bytes));
  }
  ParamAttr param = use ? ParamAttr::get(b.getContext(), use->name, use->transposed) : ParamAttr();
  return b.create<ConstantOp>(UnknownLoc::get(b.getContext()), attr, b.getStringAttr(t.name()),
                              param);
}

Value GraphImporter::paramConstant(const std::string &init, const ParamUse &use) {
  Value &v = paramValues[{init, use.name}];
  if (!v) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(b.getInsertionBlock());
    v = weightConstant(*entry(init).init, &use);
  }
  return v;
}

void GraphImporter::tieParameterCopies() {
  auto dims = [](RankedTensorType t) {
    std::string s = "[";
    for (int64_t d : t.getShape()) s += (s.size() > 1 ? "," : "") + std::to_string(d);
    return s + "]";
  };
  std::map<std::string, std::vector<ConstantOp>> byName;
  for (auto &[key, v] : paramValues)
    if (auto c = v.getDefiningOp<ConstantOp>())
      byName[key.second].push_back(c);
  for (auto &[name, copies] : byName) {
    if (copies.size() < 2)
      continue;
    // The canonical copy is one stored as the framework stores it.
    auto canonical = llvm::find_if(copies, [](ConstantOp c) { return !c.getParamAttr().getTransposed(); });
    ConstantOp keep = canonical != copies.end() ? *canonical : copies.front();
    auto keepType = cast<RankedTensorType>(keep.getType());
    for (ConstantOp c : copies) {
      if (c == keep)
        continue;
      auto type = cast<RankedTensorType>(c.getType());
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(keep);
      Value replacement;
      if (type == keepType && c.getParamAttr().getTransposed() == keep.getParamAttr().getTransposed()) {
        // Two initializers said to be one parameter must hold one tensor.
        if (c.getValue() != keep.getValue())
          throw ImportError{"parameter '" + name + "' is read from initializers '" +
                            (c.getName() ? c.getName()->str() : "") + "' and '" +
                            (keep.getName() ? keep.getName()->str() : "") +
                            "', which hold different values"};
        replacement = keep;
      } else if (type.getRank() == 2 && keepType.getRank() == 2 &&
                 type.getDimSize(0) == keepType.getDimSize(1) &&
                 type.getDimSize(1) == keepType.getDimSize(0) &&
                 c.getParamAttr().getTransposed() != keep.getParamAttr().getTransposed()) {
        replacement = b.create<TransposeOp>(c.getLoc(), keep.getResult(),
                                            b.getDenseI64ArrayAttr({1, 0}));
      } else {
        throw ImportError{"parameter '" + name + "' is read as " + dims(type) + " and as " +
                          dims(keepType) + ", which are not one tensor and its transpose"};
      }
      c.getResult().replaceAllUsesWith(replacement);
      c.erase();
    }
  }
}

Value GraphImporter::zeroParam(const std::string &name, ArrayRef<int64_t> shape, Type elem) {
  Value &v = paramValues[{"", name}];
  if (!v) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(b.getInsertionBlock());
    auto type = RankedTensorType::get(shape, elem);
    v = b.create<ConstantOp>(UnknownLoc::get(b.getContext()),
                             DenseElementsAttr::get(type, b.getZeroAttr(elem)), StringAttr(),
                             ParamAttr::get(b.getContext(), name, false));
  }
  return v;
}

Value GraphImporter::valueOf(const std::string &name) {
  auto it = entries.find(name);
  if (it == entries.end())
    fail("input '" + name + "' is not produced by any node, initializer or "
         "graph input");
  Entry &e = it->second;
  if (e.value)
    return e.value;
  // Weights and initializers are materialized at the top of the function
  // so they dominate every use, and keep their ONNX names.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(b.getInsertionBlock());
  if (e.init && e.weight)
    e.value = weightConstant(*e.init, nullptr);
  else if (const HostTensor *h = knownValue(name))
    e.value = constant(*h, e.init ? StringRef(name) : StringRef());
  else if (!e.sequence.empty())
    fail("value '" + name + "' is a sequence, used as a tensor");
  return e.value;
}

Value GraphImporter::graphOutput(const std::string &name) {
  curNode = nullptr;
  curLoc = UnknownLoc::get(b.getContext());
  if (!entries.count(name))
    fail("graph output '" + name + "' is not produced by any node, "
         "initializer or graph input");
  return valueOf(name);
}

Value GraphImporter::input(size_t k) {
  if (!hasInput(k))
    fail("missing input " + std::to_string(k));
  const std::string &name = curNode->input(k);
  auto it = entries.find(name);
  ParamUse use;
  if (it != entries.end() && it->second.init &&
      isFloatType(ElemType(it->second.init->data_type())) &&
      torchInfo.paramForInput(*curNode, int(k), use))
    return paramConstant(name, use);
  return valueOf(name);
}

void GraphImporter::setOutput(size_t k, Value v) {
  if (int(k) < curNode->output_size() && !curNode->output(k).empty())
    entry(curNode->output(k)).value = v;
}

void GraphImporter::setSequenceOutput(size_t k, std::vector<Value> values) {
  if (int(k) < curNode->output_size())
    entry(curNode->output(k)).sequence = std::move(values);
}

const std::vector<Value> &GraphImporter::sequenceInput(size_t k) {
  if (!hasInput(k))
    fail("missing input " + std::to_string(k));
  Entry &e = entry(curNode->input(k));
  if (e.sequence.empty())
    fail("input '" + curNode->input(k) + "' is not a sequence");
  return e.sequence;
}

Operation *GraphImporter::create(StringRef name, ValueRange operands,
                                 ArrayRef<NamedAttribute> attrs,
                                 unsigned numResults) {
  // Build with placeholder types, then infer the real ones from the built
  // op, so an inference failure is a diagnostic we can report rather than a
  // fatal error inside a generated builder.
  OperationState state(curLoc, name);
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(SmallVector<Type>(numResults, operands.front().getType()));
  Operation *op = b.create(state);
  std::string diag;
  SmallVector<Type> types;
  {
    ScopedDiagnosticHandler handler(b.getContext(), [&](Diagnostic &d) {
      diag = d.str();
      return success();
    });
    auto iface = cast<InferTypeOpInterface>(op);
    if (failed(iface.inferReturnTypes(b.getContext(), curLoc, op->getOperands(),
                                      op->getRawDictionaryAttrs(),
                                      op->getPropertiesStorage(),
                                      op->getRegions(), types)) ||
        types.size() != numResults) {
      op->erase();
      fail(diag.empty() ? "operand shapes do not fit " + name.str() : diag);
    }
  }
  for (unsigned k = 0; k < numResults; ++k)
    op->getResult(k).setType(types[k]);
  return op;
}

Value GraphImporter::createTyped(StringRef name, Value operand, Type resultType) {
  OperationState state(curLoc, name);
  state.addOperands(operand);
  state.addTypes(resultType);
  return b.create(state)->getResult(0);
}

bool GraphImporter::tryFold(const onnx::NodeProto &node) {
  std::vector<const HostTensor *> inputs;
  HostTensor shapeValue;
  if (node.op_type() == "Shape") {
    // Static shapes make Shape a constant even when its input is computed.
    Value v;
    const HostTensor *h = knownValue(node.input(0));
    std::vector<int64_t> shape;
    if (h) {
      shape = h->shape;
    } else {
      v = valueOf(node.input(0));
      shape = std::vector<int64_t>(cast<RankedTensorType>(v.getType()).getShape());
    }
    int64_t rank = int64_t(shape.size());
    int64_t start = attrInt(node, "start", 0), end = attrInt(node, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    entry(node.output(0)).host =
        HostTensor::ints(std::vector<int64_t>(shape.begin() + start, shape.begin() + end));
    return true;
  }
  if (node.op_type() == "Constant") {
    HostTensor t;
    std::string err;
    if (const auto *a = findAttr(node, "value")) {
      if (!tensorFromProto(a->t(), modelDir, t, err))
        fail(err);
    } else if (const auto *a = findAttr(node, "value_float")) {
      t = HostTensor::zeros(ElemType::Float, {});
      t.f[0] = a->f();
    } else if (const auto *a = findAttr(node, "value_int")) {
      t = HostTensor::scalarInt(a->i());
    } else if (const auto *a = findAttr(node, "value_ints")) {
      t = HostTensor::ints(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
    } else if (const auto *a = findAttr(node, "value_floats")) {
      t = HostTensor::zeros(ElemType::Float, {a->floats_size()});
      for (int k = 0; k < a->floats_size(); ++k) t.f[k] = a->floats(k);
    } else {
      fail("Constant without a supported value attribute");
    }
    entry(node.output(0)).host = std::move(t);
    return true;
  }
  if (!hasFoldingRule(node.op_type()))
    return false;
  for (int k = 0; k < node.input_size(); ++k) {
    if (node.input(k).empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    // A parameter must survive as an operand, whatever it is combined with.
    ParamUse use;
    if (torchInfo.paramForInput(node, k, use))
      return false;
    const HostTensor *h = knownValue(node.input(k));
    if (!h)
      return false;
    inputs.push_back(h);
  }
  std::vector<HostTensor> outputs;
  std::string err;
  switch (foldNode(node, inputs, outputs, err)) {
  case FoldStatus::NotFoldable:
    return false;
  case FoldStatus::Error:
    fail(err);
  case FoldStatus::Folded:
    break;
  }
  for (size_t k = 0; k < outputs.size() && int(k) < node.output_size(); ++k)
    entry(node.output(k)).host = std::move(outputs[k]);
  return true;
}

void GraphImporter::importNode(const onnx::NodeProto &node) {
  curNode = &node;
  if (node.output_size() == 0)
    fail("the node has no outputs");
  if (size_t required = requiredOnnxInputs(node.op_type()); size_t(node.input_size()) < required)
    fail("has " + std::to_string(node.input_size()) + " inputs, " + node.op_type() + " needs " +
         std::to_string(required));
  std::string name = node.name().empty() ? node.output(0) : node.name();
  curLoc = NameLoc::get(b.getStringAttr(name));
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    fail("unsupported op '" + node.op_type() + "' of domain '" + node.domain() +
         "' (opset " + std::to_string(opset) + ")");
  if (!tryFold(node) && !emitNode(*this, node))
    fail("unsupported op '" + node.op_type() + "' (opset " +
         std::to_string(opset) + ")");
  // Known values nobody reads any more free their memory (an IR constant
  // made from one stays).
  for (const std::string &in : node.input()) {
    auto u = usesLeft.find(in);
    if (u == usesLeft.end() || --u->second > 0)
      continue;
    auto it = entries.find(in);
    if (it != entries.end() && it->second.host)
      it->second.host.reset();
  }
}

void GraphImporter::countUses(const onnx::GraphProto &graph) {
  for (const auto &node : graph.node())
    for (const std::string &in : node.input())
      if (!in.empty())
        ++usesLeft[in];
  for (const auto &out : graph.output())
    usesLeft[out.name()] += int64_t(1) << 40; // read after the last node
}

} // namespace loom::onnx_import

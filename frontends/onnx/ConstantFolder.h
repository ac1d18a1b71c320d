//===- ConstantFolder.h - Evaluating ONNX nodes on known values -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// With batch and sequence specialized, every shape is static, so the
// exporters' shape arithmetic (Shape, Range, Concat, ...) and causal-mask
// construction (CumSum, GatherND, Equal, And, Where, ...) compute from known
// values only. The importer folds such nodes here, following the ONNX spec
// op by op, and never builds IR for them.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_CONSTANTFOLDER_H
#define LOOM_FRONTENDS_ONNX_CONSTANTFOLDER_H

#include "frontends/onnx/HostTensor.h"

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace loom::onnx_import {

enum class FoldStatus { Folded, NotFoldable, Error };

/// Evaluates `node` given its inputs' values (nullptr for an omitted
/// optional input). NotFoldable: the op has no folding rule. Error: the
/// inputs break the op's rules; `err` says how.
FoldStatus foldNode(const onnx::NodeProto &node,
                    const std::vector<const HostTensor *> &inputs,
                    std::vector<HostTensor> &outputs, std::string &err);

/// Whether `opType` has a folding rule (for the importer's error messages).
bool hasFoldingRule(const std::string &opType);

/// The inputs the ONNX operator specification requires of `op` (the
/// leading ones; later inputs are optional): the importer refuses a node
/// with fewer before any folding rule or emitter reads them.
size_t requiredOnnxInputs(const std::string &op);
/// The op types with a folding rule (besides Shape and Constant, which the
/// importer evaluates itself).
std::vector<std::string> foldingRuleOps();

} // namespace loom::onnx_import

#endif

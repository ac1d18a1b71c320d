//===- OnnxExporter.h - Trained parameters back into the ONNX graph -*- C++ -*-===//
//
// Part of loom, under the Apache License v2.0.
//
// Writes a copy of the model whose initializers hold trained values: the
// same graph, new weights. Parameters are found the way the importer finds
// them (TorchExportInfo: which node input holds which parameter, stored
// transposed or not), so values go back in the layout the graph reads.
// Where the exporter merged equal initializers (every all-ones norm weight
// into one), each parameter gets its own initializer and its uses are
// rewired to it.
//===----------------------------------------------------------------------===//
#ifndef LOOM_FRONTENDS_ONNX_ONNXEXPORTER_H
#define LOOM_FRONTENDS_ONNX_ONNXEXPORTER_H

#include <map>
#include <string>
#include <vector>

namespace loom {

/// `params` maps parameter names (as the importer names them) to values in
/// the graph's layout. Writes `outPath` atomically; false with a one-line
/// `err` (a parameter the graph has no initializer for, a size mismatch,
/// an unreadable model).
bool exportOnnxWithParameters(const std::string &inPath, const std::string &outPath,
                              const std::map<std::string, std::vector<float>> &params,
                              std::string &err);

} // namespace loom

#endif

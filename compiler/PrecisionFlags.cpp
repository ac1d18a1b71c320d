//===- PrecisionFlags.cpp -------------------------------------------------===//
//
// Part of loom, under the Apache License v2.0.
//
//===----------------------------------------------------------------------===//
#include "compiler/PrecisionFlags.h"

namespace loom::compiler {

bool readPrecisionFlags(const std::string &precision, const std::string &fp8, bool fp8LmHead,
                        TrainOptions &o, std::string &err) {
  if (precision != "fp32" && precision != "bf16") {
    err = "--precision must be fp32 or bf16, not '" + precision + "'";
    return false;
  }
  if (fp8 != "off" && fp8 != "tensorwise" && fp8 != "rowwise") {
    err = "--fp8 must be off, tensorwise or rowwise, not '" + fp8 + "'";
    return false;
  }
  if (fp8 == "off" && fp8LmHead) {
    err = "--fp8-lm-head needs --fp8 tensorwise or rowwise";
    return false;
  }
  o.bf16 = precision == "bf16";
  o.fp8 = fp8 == "off" ? "" : fp8;
  o.fp8LmHead = fp8LmHead;
  return true;
}

} // namespace loom::compiler

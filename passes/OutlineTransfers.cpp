//===- OutlineTransfers.cpp - send/recv become results and arguments -----===//
//
// Part of loom, under the Apache License v2.0.
//
// Codegen lowers functions of tensors in and tensors out; moving a tensor
// between ranks is the schedule executor's job (the schedule's transfer
// actions, Communicator::sendRecv). So before lowering, each loom.recv of a
// pipeline function becomes an argument and each loom.send a result, both
// tagged with the transfer's tag and kind.
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "ir/LoomOps.h"

using namespace mlir;

namespace loom {
#define GEN_PASS_DEF_OUTLINETRANSFERS
#include "passes/Passes.h.inc"

namespace {

std::string transferName(const char *dir, TransferKind kind, int64_t tag) {
  return std::string(dir) + "." + stringifyTransferKind(kind).str() + "." + std::to_string(tag);
}

struct OutlineTransfersPass : impl::OutlineTransfersBase<OutlineTransfersPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (!fn->hasAttr("loom.pipeline"))
        continue;
      Block &entry = fn.getBody().front();
      auto ret = cast<func::ReturnOp>(entry.getTerminator());
      SmallVector<RecvOp> recvs;
      SmallVector<SendOp> sends;
      fn.walk([&](RecvOp r) { recvs.push_back(r); });
      fn.walk([&](SendOp s) { sends.push_back(s); });
      for (RecvOp r : recvs) {
        NamedAttrList attrs;
        attrs.set("loom.pipeline_value", PipelineValueAttr::get(ctx, PipelineValueKind::recv, r.getTag()));
        attrs.set("loom.transfer", r.getKindAttr());
        attrs.set("loom.peer", r.getPeerAttr());
        attrs.set("loom.name", StringAttr::get(ctx, transferName("recv", r.getKind(), r.getTag())));
        unsigned at = fn.getNumArguments();
        if (failed(fn.insertArgument(at, r.getType(), attrs.getDictionary(ctx), r.getLoc())))
          return signalPassFailure();
        r.getResult().replaceAllUsesWith(entry.getArgument(at));
        r.erase();
      }
      SmallVector<Value> results(ret.getOperands());
      for (SendOp s : sends) {
        NamedAttrList attrs;
        attrs.set("loom.pipeline_value", PipelineValueAttr::get(ctx, PipelineValueKind::send, s.getTag()));
        attrs.set("loom.transfer", s.getKindAttr());
        attrs.set("loom.peer", s.getPeerAttr());
        attrs.set("loom.name", StringAttr::get(ctx, transferName("send", s.getKind(), s.getTag())));
        if (failed(fn.insertResult(unsigned(results.size()), s.getInput().getType(),
                                   attrs.getDictionary(ctx))))
          return signalPassFailure();
        results.push_back(s.getInput());
        s.erase();
      }
      ret->setOperands(results);
    }
  }
};

} // namespace
} // namespace loom

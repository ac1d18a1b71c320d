// RUN: loom-opt %s --loom-build-train-step=return-activation-sums=true --loom-annotate-data-parallel="dp-shard=2" --loom-insert-fsdp-collectives --loom-insert-ddp-collectives --canonicalize --cse --loom-fuse-gradient-clipping | FileCheck %s --check-prefix=FSDP
// RUN: loom-opt %s --loom-build-train-step --loom-annotate-data-parallel="dp-replicate=2" --loom-insert-fsdp-collectives --loom-insert-ddp-collectives="bucket-bytes=200" --canonicalize --cse --loom-fuse-gradient-clipping | FileCheck %s --check-prefix=DDP

// loom-fuse-gradient-clipping on training steps the SPMD passes rewrote
// (the order tools/loom/TrainProgram.cpp runs them in).

// FSDP (dp_shard=2): the sharded gradients' terms are sums of squares of
// the reduce_scatter's shard, all_reduced afterwards; the replicated
// embedding's gradient is all_reduced before its square; the activation
// check (the residual stream entering rms_norm) is fused too. No square or
// clip product is left.
// FSDP-LABEL: func.func @train_step
// FSDP: %[[ACT:.*]] = loom.sum_squares %{{.*}} : tensor<2x3x4xf32>
// FSDP: %[[DHEAD:.*]] = loom.reduce_scatter mean %{{.*}} dim 0 : tensor<4x7xf32> -> tensor<2x7xf32>
// FSDP: %[[DNORM:.*]] = loom.reduce_scatter mean %{{.*}} dim 0 : tensor<4xf32> -> tensor<2xf32>
// FSDP: %[[DEMB:.*]] = loom.all_reduce mean %{{.*}} : tensor<7x4xf32>
// FSDP: loom.sum_squares %[[DEMB]] : tensor<7x4xf32>
// FSDP: %[[SNORM:.*]] = loom.sum_squares %[[DNORM]] : tensor<2xf32>
// FSDP-NEXT: loom.all_reduce sum %[[SNORM]] over [#loom<mesh_axis dp_shard>] : tensor<f32>
// FSDP: %[[SHEAD:.*]] = loom.sum_squares %[[DHEAD]] : tensor<2x7xf32>
// FSDP-NEXT: loom.all_reduce sum %[[SHEAD]] over [#loom<mesh_axis dp_shard>] : tensor<f32>
// FSDP: %[[COEF:.*]] = loom.min
// FSDP: loom.adamw %arg0, %[[DEMB]], %arg3, %arg6, %{{.*}}, %arg9 grad_scale %[[COEF]]
// FSDP: loom.adamw %arg1, %[[DNORM]], %arg4, %arg7, %{{.*}}, %arg9 grad_scale %[[COEF]]
// FSDP: loom.adamw %arg2, %[[DHEAD]], %arg5, %arg8, %{{.*}}, %arg9 grad_scale %[[COEF]]
// FSDP: return {{.*}}%[[ACT]] :
// FSDP-NOT: loom.reduce sum

// DDP (dp_replicate=2, 200-byte buckets): each gradient is a piece of a
// bucket's all_reduce; its square and its clip fuse all the same.
// DDP-LABEL: func.func @train_step
// DDP-NOT: loom.reduce sum
// DDP: loom.all_reduce mean
// DDP: loom.sum_squares %{{.*}} : tensor<7x4xf32>
// DDP: loom.sum_squares %{{.*}} : tensor<4xf32>
// DDP: loom.sum_squares %{{.*}} : tensor<4x7xf32>
// DDP: %[[COEF:.*]] = loom.min
// DDP: loom.adamw %arg0, %{{.*}} grad_scale %[[COEF]]
// DDP: loom.adamw %arg1, %{{.*}} grad_scale %[[COEF]]
// DDP: loom.adamw %arg2, %{{.*}} grad_scale %[[COEF]]
// DDP-NOT: loom.reduce sum
func.func @forward(%tok: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %e = loom.constant {param = #loom.param<"embed">} dense<0.5> : tensor<7x4xf32>
  %g = loom.constant {param = #loom.param<"norm.weight">} dense<1.0> : tensor<4xf32>
  %head = loom.constant {param = #loom.param<"head", transposed>} dense<0.25> : tensor<4x7xf32>
  %h = loom.embedding %e, %tok : tensor<7x4xf32>, tensor<2x3xi64>
  %n = loom.rms_norm %h, %g {epsilon = 1.0e-6 : f64} : tensor<2x3x4xf32>, tensor<4xf32>
  %l = loom.matmul %n, %head : tensor<2x3x4xf32>, tensor<4x7xf32>
  return %l : tensor<2x3x7xf32>
}

// Llama-3.2-1B-shaped forward IR for the planner's tests: the fused loom IR
// of ../shared/fixtures/graphs/llama32-1b.graph.onnx (a graph-only export;
// its 2.5 GB of bf16 weights are absent), with every weight elided, so it
// holds shapes and parameter names only.
//
// Made with (before `loom import --shapes-only` existed, which now gives
// the same IR without the sparse file and the retyping; graph-only-onnx.test
// checks that planning from the ONNX file and from this IR agree):
//   truncate -s 8G llama-1b.onnx.data
//   loom import llama32-1b.graph.onnx --batch 2048 --fuse \
//       --elide-constants-larger-than 16 > ir.mlir   # input [1, 2048]: seq 2048
//   sed 's/xbf16>/xf32>/g; s/tensor<bf16>/tensor<f32>/g' ir.mlir
module {
  func.func @forward(%arg0: tensor<1x2048xi64> {loom.name = "input_ids"}) -> (tensor<1x2048x128256xf32> {loom.name = "logits"}) {
    %0 = loom.constant {name = "m.model.norm.weight", param = #loom.param<"m.model.norm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %1 = loom.constant {name = "val_1783", param = #loom.param<"m.model.layers.15.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %2 = loom.constant {name = "val_1782", param = #loom.param<"m.model.layers.15.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %3 = loom.constant {name = "val_1780", param = #loom.param<"m.model.layers.15.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %4 = loom.constant {name = "m.model.layers.15.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.15.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %5 = loom.constant {name = "val_1775", param = #loom.param<"m.model.layers.15.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %6 = loom.constant {name = "val_1696", param = #loom.param<"m.model.layers.15.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %7 = loom.constant {name = "val_1689", param = #loom.param<"m.model.layers.15.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %8 = loom.constant {name = "val_1682", param = #loom.param<"m.model.layers.15.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %9 = loom.constant {name = "m.model.layers.15.input_layernorm.weight", param = #loom.param<"m.model.layers.15.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %10 = loom.constant {name = "val_1677", param = #loom.param<"m.model.layers.14.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %11 = loom.constant {name = "val_1676", param = #loom.param<"m.model.layers.14.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %12 = loom.constant {name = "val_1674", param = #loom.param<"m.model.layers.14.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %13 = loom.constant {name = "m.model.layers.14.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.14.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %14 = loom.constant {name = "val_1669", param = #loom.param<"m.model.layers.14.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %15 = loom.constant {name = "val_1590", param = #loom.param<"m.model.layers.14.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %16 = loom.constant {name = "val_1583", param = #loom.param<"m.model.layers.14.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %17 = loom.constant {name = "val_1576", param = #loom.param<"m.model.layers.14.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %18 = loom.constant {name = "m.model.layers.14.input_layernorm.weight", param = #loom.param<"m.model.layers.14.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %19 = loom.constant {name = "val_1571", param = #loom.param<"m.model.layers.13.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %20 = loom.constant {name = "val_1570", param = #loom.param<"m.model.layers.13.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %21 = loom.constant {name = "val_1568", param = #loom.param<"m.model.layers.13.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %22 = loom.constant {name = "m.model.layers.13.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.13.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %23 = loom.constant {name = "val_1563", param = #loom.param<"m.model.layers.13.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %24 = loom.constant {name = "val_1484", param = #loom.param<"m.model.layers.13.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %25 = loom.constant {name = "val_1477", param = #loom.param<"m.model.layers.13.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %26 = loom.constant {name = "val_1470", param = #loom.param<"m.model.layers.13.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %27 = loom.constant {name = "m.model.layers.13.input_layernorm.weight", param = #loom.param<"m.model.layers.13.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %28 = loom.constant {name = "val_1465", param = #loom.param<"m.model.layers.12.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %29 = loom.constant {name = "val_1464", param = #loom.param<"m.model.layers.12.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %30 = loom.constant {name = "val_1462", param = #loom.param<"m.model.layers.12.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %31 = loom.constant {name = "m.model.layers.12.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.12.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %32 = loom.constant {name = "val_1457", param = #loom.param<"m.model.layers.12.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %33 = loom.constant {name = "val_1378", param = #loom.param<"m.model.layers.12.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %34 = loom.constant {name = "val_1371", param = #loom.param<"m.model.layers.12.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %35 = loom.constant {name = "val_1364", param = #loom.param<"m.model.layers.12.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %36 = loom.constant {name = "m.model.layers.12.input_layernorm.weight", param = #loom.param<"m.model.layers.12.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %37 = loom.constant {name = "val_1359", param = #loom.param<"m.model.layers.11.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %38 = loom.constant {name = "val_1358", param = #loom.param<"m.model.layers.11.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %39 = loom.constant {name = "val_1356", param = #loom.param<"m.model.layers.11.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %40 = loom.constant {name = "m.model.layers.11.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.11.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %41 = loom.constant {name = "val_1351", param = #loom.param<"m.model.layers.11.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %42 = loom.constant {name = "val_1272", param = #loom.param<"m.model.layers.11.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %43 = loom.constant {name = "val_1265", param = #loom.param<"m.model.layers.11.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %44 = loom.constant {name = "val_1258", param = #loom.param<"m.model.layers.11.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %45 = loom.constant {name = "m.model.layers.11.input_layernorm.weight", param = #loom.param<"m.model.layers.11.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %46 = loom.constant {name = "val_1253", param = #loom.param<"m.model.layers.10.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %47 = loom.constant {name = "val_1252", param = #loom.param<"m.model.layers.10.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %48 = loom.constant {name = "val_1250", param = #loom.param<"m.model.layers.10.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %49 = loom.constant {name = "m.model.layers.10.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.10.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %50 = loom.constant {name = "val_1245", param = #loom.param<"m.model.layers.10.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %51 = loom.constant {name = "val_1166", param = #loom.param<"m.model.layers.10.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %52 = loom.constant {name = "val_1159", param = #loom.param<"m.model.layers.10.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %53 = loom.constant {name = "val_1152", param = #loom.param<"m.model.layers.10.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %54 = loom.constant {name = "m.model.layers.10.input_layernorm.weight", param = #loom.param<"m.model.layers.10.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %55 = loom.constant {name = "val_1147", param = #loom.param<"m.model.layers.9.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %56 = loom.constant {name = "val_1146", param = #loom.param<"m.model.layers.9.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %57 = loom.constant {name = "val_1144", param = #loom.param<"m.model.layers.9.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %58 = loom.constant {name = "m.model.layers.9.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.9.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %59 = loom.constant {name = "val_1139", param = #loom.param<"m.model.layers.9.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %60 = loom.constant {name = "val_1060", param = #loom.param<"m.model.layers.9.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %61 = loom.constant {name = "val_1053", param = #loom.param<"m.model.layers.9.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %62 = loom.constant {name = "val_1046", param = #loom.param<"m.model.layers.9.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %63 = loom.constant {name = "m.model.layers.9.input_layernorm.weight", param = #loom.param<"m.model.layers.9.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %64 = loom.constant {name = "val_1041", param = #loom.param<"m.model.layers.8.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %65 = loom.constant {name = "val_1040", param = #loom.param<"m.model.layers.8.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %66 = loom.constant {name = "val_1038", param = #loom.param<"m.model.layers.8.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %67 = loom.constant {name = "m.model.layers.8.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.8.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %68 = loom.constant {name = "val_1033", param = #loom.param<"m.model.layers.8.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %69 = loom.constant {name = "val_954", param = #loom.param<"m.model.layers.8.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %70 = loom.constant {name = "val_947", param = #loom.param<"m.model.layers.8.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %71 = loom.constant {name = "val_940", param = #loom.param<"m.model.layers.8.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %72 = loom.constant {name = "m.model.layers.8.input_layernorm.weight", param = #loom.param<"m.model.layers.8.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %73 = loom.constant {name = "val_935", param = #loom.param<"m.model.layers.7.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %74 = loom.constant {name = "val_934", param = #loom.param<"m.model.layers.7.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %75 = loom.constant {name = "val_932", param = #loom.param<"m.model.layers.7.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %76 = loom.constant {name = "m.model.layers.7.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.7.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %77 = loom.constant {name = "val_927", param = #loom.param<"m.model.layers.7.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %78 = loom.constant {name = "val_848", param = #loom.param<"m.model.layers.7.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %79 = loom.constant {name = "val_841", param = #loom.param<"m.model.layers.7.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %80 = loom.constant {name = "val_834", param = #loom.param<"m.model.layers.7.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %81 = loom.constant {name = "m.model.layers.7.input_layernorm.weight", param = #loom.param<"m.model.layers.7.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %82 = loom.constant {name = "val_829", param = #loom.param<"m.model.layers.6.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %83 = loom.constant {name = "val_828", param = #loom.param<"m.model.layers.6.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %84 = loom.constant {name = "val_826", param = #loom.param<"m.model.layers.6.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %85 = loom.constant {name = "m.model.layers.6.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.6.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %86 = loom.constant {name = "val_821", param = #loom.param<"m.model.layers.6.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %87 = loom.constant {name = "val_742", param = #loom.param<"m.model.layers.6.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %88 = loom.constant {name = "val_735", param = #loom.param<"m.model.layers.6.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %89 = loom.constant {name = "val_728", param = #loom.param<"m.model.layers.6.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %90 = loom.constant {name = "m.model.layers.6.input_layernorm.weight", param = #loom.param<"m.model.layers.6.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %91 = loom.constant {name = "val_723", param = #loom.param<"m.model.layers.5.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %92 = loom.constant {name = "val_722", param = #loom.param<"m.model.layers.5.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %93 = loom.constant {name = "val_720", param = #loom.param<"m.model.layers.5.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %94 = loom.constant {name = "m.model.layers.5.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.5.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %95 = loom.constant {name = "val_715", param = #loom.param<"m.model.layers.5.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %96 = loom.constant {name = "val_636", param = #loom.param<"m.model.layers.5.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %97 = loom.constant {name = "val_629", param = #loom.param<"m.model.layers.5.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %98 = loom.constant {name = "val_622", param = #loom.param<"m.model.layers.5.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %99 = loom.constant {name = "m.model.layers.5.input_layernorm.weight", param = #loom.param<"m.model.layers.5.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %100 = loom.constant {name = "val_617", param = #loom.param<"m.model.layers.4.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %101 = loom.constant {name = "val_616", param = #loom.param<"m.model.layers.4.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %102 = loom.constant {name = "val_614", param = #loom.param<"m.model.layers.4.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %103 = loom.constant {name = "m.model.layers.4.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.4.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %104 = loom.constant {name = "val_609", param = #loom.param<"m.model.layers.4.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %105 = loom.constant {name = "val_530", param = #loom.param<"m.model.layers.4.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %106 = loom.constant {name = "val_523", param = #loom.param<"m.model.layers.4.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %107 = loom.constant {name = "val_516", param = #loom.param<"m.model.layers.4.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %108 = loom.constant {name = "m.model.layers.4.input_layernorm.weight", param = #loom.param<"m.model.layers.4.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %109 = loom.constant {name = "val_511", param = #loom.param<"m.model.layers.3.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %110 = loom.constant {name = "val_510", param = #loom.param<"m.model.layers.3.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %111 = loom.constant {name = "val_508", param = #loom.param<"m.model.layers.3.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %112 = loom.constant {name = "m.model.layers.3.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.3.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %113 = loom.constant {name = "val_503", param = #loom.param<"m.model.layers.3.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %114 = loom.constant {name = "val_424", param = #loom.param<"m.model.layers.3.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %115 = loom.constant {name = "val_417", param = #loom.param<"m.model.layers.3.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %116 = loom.constant {name = "val_410", param = #loom.param<"m.model.layers.3.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %117 = loom.constant {name = "m.model.layers.3.input_layernorm.weight", param = #loom.param<"m.model.layers.3.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %118 = loom.constant {name = "val_405", param = #loom.param<"m.model.layers.2.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %119 = loom.constant {name = "val_404", param = #loom.param<"m.model.layers.2.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %120 = loom.constant {name = "val_402", param = #loom.param<"m.model.layers.2.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %121 = loom.constant {name = "m.model.layers.2.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.2.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %122 = loom.constant {name = "val_397", param = #loom.param<"m.model.layers.2.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %123 = loom.constant {name = "val_318", param = #loom.param<"m.model.layers.2.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %124 = loom.constant {name = "val_311", param = #loom.param<"m.model.layers.2.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %125 = loom.constant {name = "val_304", param = #loom.param<"m.model.layers.2.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %126 = loom.constant {name = "m.model.layers.2.input_layernorm.weight", param = #loom.param<"m.model.layers.2.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %127 = loom.constant {name = "val_299", param = #loom.param<"m.model.layers.1.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %128 = loom.constant {name = "val_298", param = #loom.param<"m.model.layers.1.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %129 = loom.constant {name = "val_296", param = #loom.param<"m.model.layers.1.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %130 = loom.constant {name = "m.model.layers.1.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.1.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %131 = loom.constant {name = "val_291", param = #loom.param<"m.model.layers.1.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %132 = loom.constant {name = "val_212", param = #loom.param<"m.model.layers.1.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %133 = loom.constant {name = "val_205", param = #loom.param<"m.model.layers.1.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %134 = loom.constant {name = "val_198", param = #loom.param<"m.model.layers.1.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %135 = loom.constant {name = "m.model.layers.1.input_layernorm.weight", param = #loom.param<"m.model.layers.1.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %136 = loom.constant {name = "val_193", param = #loom.param<"m.model.layers.0.mlp.down_proj.weight", transposed>} dense<0.000000e+00> : tensor<8192x2048xf32>
    %137 = loom.constant {name = "val_192", param = #loom.param<"m.model.layers.0.mlp.up_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %138 = loom.constant {name = "val_190", param = #loom.param<"m.model.layers.0.mlp.gate_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x8192xf32>
    %139 = loom.constant {name = "m.model.layers.0.post_attention_layernorm.weight", param = #loom.param<"m.model.layers.0.post_attention_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %140 = loom.constant {name = "val_185", param = #loom.param<"m.model.layers.0.self_attn.o_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %141 = loom.constant dense_resource<__elided__> : tensor<1x1x2048x64xf32>
    %142 = loom.constant dense_resource<__elided__> : tensor<1x1x2048x64xf32>
    %143 = loom.constant {name = "val_102", param = #loom.param<"m.model.layers.0.self_attn.v_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %144 = loom.constant {name = "val_95", param = #loom.param<"m.model.layers.0.self_attn.k_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x512xf32>
    %145 = loom.constant {name = "val_88", param = #loom.param<"m.model.layers.0.self_attn.q_proj.weight", transposed>} dense<0.000000e+00> : tensor<2048x2048xf32>
    %146 = loom.constant {name = "m.model.layers.0.input_layernorm.weight", param = #loom.param<"m.model.layers.0.input_layernorm.weight">} dense<0.000000e+00> : tensor<2048xf32>
    %147 = loom.constant {name = "val_86"} dense<9.99999974E-6> : tensor<f32>
    %148 = loom.constant {name = "val_83"} dense<2.000000e+00> : tensor<f32>
    %149 = loom.constant {name = "m.lm_head.weight", param = #loom.param<"m.lm_head.weight">} dense<0.000000e+00> : tensor<128256x2048xf32>
    %150 = loom.embedding %149, %arg0 : tensor<128256x2048xf32>, tensor<1x2048xi64>
    %151 = loom.cast %150 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %152 = loom.pow %151, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %153 = loom.reduce  mean %152 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %154 = loom.add %153, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %155 = loom.sqrt %154 : tensor<1x2048x1xf32>
    %156 = loom.reciprocal %155 : tensor<1x2048x1xf32>
    %157 = loom.mul %151, %156 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %158 = loom.cast %157 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %159 = loom.mul %158, %146 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %160 = loom.matmul %159, %145 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %161 = loom.reshape %160 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %162 = loom.transpose %161 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %163 = loom.matmul %159, %144 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %164 = loom.reshape %163 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %165 = loom.transpose %164 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %166 = loom.matmul %159, %143 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %167 = loom.reshape %166 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %168 = loom.transpose %167 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %169 = loom.rotary %162, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %170 = loom.rotary %165, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %171, %lse171 = loom.attention %169, %170, %168 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %172 = loom.transpose %171 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %173 = loom.reshape %172 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %174 = loom.matmul %173, %140 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %175 = loom.add %150, %174 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %176 = loom.cast %175 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %177 = loom.pow %176, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %178 = loom.reduce  mean %177 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %179 = loom.add %178, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %180 = loom.sqrt %179 : tensor<1x2048x1xf32>
    %181 = loom.reciprocal %180 : tensor<1x2048x1xf32>
    %182 = loom.mul %176, %181 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %183 = loom.cast %182 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %184 = loom.mul %183, %139 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %185 = loom.matmul %184, %138 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %186 = loom.silu %185 : tensor<1x2048x8192xf32>
    %187 = loom.matmul %184, %137 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %188 = loom.mul %186, %187 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %189 = loom.matmul %188, %136 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %190 = loom.add %175, %189 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %191 = loom.cast %190 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %192 = loom.pow %191, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %193 = loom.reduce  mean %192 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %194 = loom.add %193, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %195 = loom.sqrt %194 : tensor<1x2048x1xf32>
    %196 = loom.reciprocal %195 : tensor<1x2048x1xf32>
    %197 = loom.mul %191, %196 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %198 = loom.cast %197 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %199 = loom.mul %198, %135 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %200 = loom.matmul %199, %134 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %201 = loom.reshape %200 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %202 = loom.transpose %201 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %203 = loom.matmul %199, %133 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %204 = loom.reshape %203 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %205 = loom.transpose %204 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %206 = loom.matmul %199, %132 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %207 = loom.reshape %206 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %208 = loom.transpose %207 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %209 = loom.rotary %202, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %210 = loom.rotary %205, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %211, %lse211 = loom.attention %209, %210, %208 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %212 = loom.transpose %211 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %213 = loom.reshape %212 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %214 = loom.matmul %213, %131 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %215 = loom.add %190, %214 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %216 = loom.cast %215 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %217 = loom.pow %216, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %218 = loom.reduce  mean %217 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %219 = loom.add %218, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %220 = loom.sqrt %219 : tensor<1x2048x1xf32>
    %221 = loom.reciprocal %220 : tensor<1x2048x1xf32>
    %222 = loom.mul %216, %221 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %223 = loom.cast %222 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %224 = loom.mul %223, %130 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %225 = loom.matmul %224, %129 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %226 = loom.silu %225 : tensor<1x2048x8192xf32>
    %227 = loom.matmul %224, %128 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %228 = loom.mul %226, %227 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %229 = loom.matmul %228, %127 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %230 = loom.add %215, %229 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %231 = loom.cast %230 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %232 = loom.pow %231, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %233 = loom.reduce  mean %232 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %234 = loom.add %233, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %235 = loom.sqrt %234 : tensor<1x2048x1xf32>
    %236 = loom.reciprocal %235 : tensor<1x2048x1xf32>
    %237 = loom.mul %231, %236 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %238 = loom.cast %237 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %239 = loom.mul %238, %126 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %240 = loom.matmul %239, %125 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %241 = loom.reshape %240 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %242 = loom.transpose %241 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %243 = loom.matmul %239, %124 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %244 = loom.reshape %243 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %245 = loom.transpose %244 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %246 = loom.matmul %239, %123 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %247 = loom.reshape %246 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %248 = loom.transpose %247 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %249 = loom.rotary %242, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %250 = loom.rotary %245, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %251, %lse251 = loom.attention %249, %250, %248 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %252 = loom.transpose %251 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %253 = loom.reshape %252 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %254 = loom.matmul %253, %122 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %255 = loom.add %230, %254 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %256 = loom.cast %255 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %257 = loom.pow %256, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %258 = loom.reduce  mean %257 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %259 = loom.add %258, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %260 = loom.sqrt %259 : tensor<1x2048x1xf32>
    %261 = loom.reciprocal %260 : tensor<1x2048x1xf32>
    %262 = loom.mul %256, %261 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %263 = loom.cast %262 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %264 = loom.mul %263, %121 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %265 = loom.matmul %264, %120 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %266 = loom.silu %265 : tensor<1x2048x8192xf32>
    %267 = loom.matmul %264, %119 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %268 = loom.mul %266, %267 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %269 = loom.matmul %268, %118 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %270 = loom.add %255, %269 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %271 = loom.cast %270 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %272 = loom.pow %271, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %273 = loom.reduce  mean %272 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %274 = loom.add %273, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %275 = loom.sqrt %274 : tensor<1x2048x1xf32>
    %276 = loom.reciprocal %275 : tensor<1x2048x1xf32>
    %277 = loom.mul %271, %276 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %278 = loom.cast %277 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %279 = loom.mul %278, %117 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %280 = loom.matmul %279, %116 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %281 = loom.reshape %280 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %282 = loom.transpose %281 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %283 = loom.matmul %279, %115 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %284 = loom.reshape %283 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %285 = loom.transpose %284 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %286 = loom.matmul %279, %114 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %287 = loom.reshape %286 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %288 = loom.transpose %287 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %289 = loom.rotary %282, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %290 = loom.rotary %285, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %291, %lse291 = loom.attention %289, %290, %288 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %292 = loom.transpose %291 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %293 = loom.reshape %292 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %294 = loom.matmul %293, %113 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %295 = loom.add %270, %294 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %296 = loom.cast %295 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %297 = loom.pow %296, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %298 = loom.reduce  mean %297 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %299 = loom.add %298, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %300 = loom.sqrt %299 : tensor<1x2048x1xf32>
    %301 = loom.reciprocal %300 : tensor<1x2048x1xf32>
    %302 = loom.mul %296, %301 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %303 = loom.cast %302 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %304 = loom.mul %303, %112 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %305 = loom.matmul %304, %111 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %306 = loom.silu %305 : tensor<1x2048x8192xf32>
    %307 = loom.matmul %304, %110 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %308 = loom.mul %306, %307 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %309 = loom.matmul %308, %109 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %310 = loom.add %295, %309 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %311 = loom.cast %310 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %312 = loom.pow %311, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %313 = loom.reduce  mean %312 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %314 = loom.add %313, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %315 = loom.sqrt %314 : tensor<1x2048x1xf32>
    %316 = loom.reciprocal %315 : tensor<1x2048x1xf32>
    %317 = loom.mul %311, %316 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %318 = loom.cast %317 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %319 = loom.mul %318, %108 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %320 = loom.matmul %319, %107 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %321 = loom.reshape %320 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %322 = loom.transpose %321 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %323 = loom.matmul %319, %106 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %324 = loom.reshape %323 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %325 = loom.transpose %324 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %326 = loom.matmul %319, %105 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %327 = loom.reshape %326 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %328 = loom.transpose %327 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %329 = loom.rotary %322, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %330 = loom.rotary %325, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %331, %lse331 = loom.attention %329, %330, %328 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %332 = loom.transpose %331 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %333 = loom.reshape %332 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %334 = loom.matmul %333, %104 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %335 = loom.add %310, %334 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %336 = loom.cast %335 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %337 = loom.pow %336, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %338 = loom.reduce  mean %337 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %339 = loom.add %338, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %340 = loom.sqrt %339 : tensor<1x2048x1xf32>
    %341 = loom.reciprocal %340 : tensor<1x2048x1xf32>
    %342 = loom.mul %336, %341 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %343 = loom.cast %342 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %344 = loom.mul %343, %103 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %345 = loom.matmul %344, %102 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %346 = loom.silu %345 : tensor<1x2048x8192xf32>
    %347 = loom.matmul %344, %101 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %348 = loom.mul %346, %347 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %349 = loom.matmul %348, %100 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %350 = loom.add %335, %349 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %351 = loom.cast %350 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %352 = loom.pow %351, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %353 = loom.reduce  mean %352 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %354 = loom.add %353, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %355 = loom.sqrt %354 : tensor<1x2048x1xf32>
    %356 = loom.reciprocal %355 : tensor<1x2048x1xf32>
    %357 = loom.mul %351, %356 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %358 = loom.cast %357 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %359 = loom.mul %358, %99 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %360 = loom.matmul %359, %98 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %361 = loom.reshape %360 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %362 = loom.transpose %361 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %363 = loom.matmul %359, %97 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %364 = loom.reshape %363 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %365 = loom.transpose %364 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %366 = loom.matmul %359, %96 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %367 = loom.reshape %366 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %368 = loom.transpose %367 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %369 = loom.rotary %362, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %370 = loom.rotary %365, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %371, %lse371 = loom.attention %369, %370, %368 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %372 = loom.transpose %371 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %373 = loom.reshape %372 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %374 = loom.matmul %373, %95 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %375 = loom.add %350, %374 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %376 = loom.cast %375 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %377 = loom.pow %376, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %378 = loom.reduce  mean %377 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %379 = loom.add %378, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %380 = loom.sqrt %379 : tensor<1x2048x1xf32>
    %381 = loom.reciprocal %380 : tensor<1x2048x1xf32>
    %382 = loom.mul %376, %381 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %383 = loom.cast %382 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %384 = loom.mul %383, %94 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %385 = loom.matmul %384, %93 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %386 = loom.silu %385 : tensor<1x2048x8192xf32>
    %387 = loom.matmul %384, %92 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %388 = loom.mul %386, %387 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %389 = loom.matmul %388, %91 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %390 = loom.add %375, %389 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %391 = loom.cast %390 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %392 = loom.pow %391, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %393 = loom.reduce  mean %392 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %394 = loom.add %393, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %395 = loom.sqrt %394 : tensor<1x2048x1xf32>
    %396 = loom.reciprocal %395 : tensor<1x2048x1xf32>
    %397 = loom.mul %391, %396 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %398 = loom.cast %397 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %399 = loom.mul %398, %90 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %400 = loom.matmul %399, %89 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %401 = loom.reshape %400 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %402 = loom.transpose %401 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %403 = loom.matmul %399, %88 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %404 = loom.reshape %403 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %405 = loom.transpose %404 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %406 = loom.matmul %399, %87 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %407 = loom.reshape %406 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %408 = loom.transpose %407 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %409 = loom.rotary %402, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %410 = loom.rotary %405, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %411, %lse411 = loom.attention %409, %410, %408 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %412 = loom.transpose %411 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %413 = loom.reshape %412 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %414 = loom.matmul %413, %86 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %415 = loom.add %390, %414 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %416 = loom.cast %415 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %417 = loom.pow %416, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %418 = loom.reduce  mean %417 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %419 = loom.add %418, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %420 = loom.sqrt %419 : tensor<1x2048x1xf32>
    %421 = loom.reciprocal %420 : tensor<1x2048x1xf32>
    %422 = loom.mul %416, %421 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %423 = loom.cast %422 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %424 = loom.mul %423, %85 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %425 = loom.matmul %424, %84 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %426 = loom.silu %425 : tensor<1x2048x8192xf32>
    %427 = loom.matmul %424, %83 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %428 = loom.mul %426, %427 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %429 = loom.matmul %428, %82 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %430 = loom.add %415, %429 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %431 = loom.cast %430 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %432 = loom.pow %431, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %433 = loom.reduce  mean %432 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %434 = loom.add %433, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %435 = loom.sqrt %434 : tensor<1x2048x1xf32>
    %436 = loom.reciprocal %435 : tensor<1x2048x1xf32>
    %437 = loom.mul %431, %436 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %438 = loom.cast %437 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %439 = loom.mul %438, %81 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %440 = loom.matmul %439, %80 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %441 = loom.reshape %440 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %442 = loom.transpose %441 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %443 = loom.matmul %439, %79 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %444 = loom.reshape %443 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %445 = loom.transpose %444 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %446 = loom.matmul %439, %78 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %447 = loom.reshape %446 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %448 = loom.transpose %447 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %449 = loom.rotary %442, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %450 = loom.rotary %445, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %451, %lse451 = loom.attention %449, %450, %448 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %452 = loom.transpose %451 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %453 = loom.reshape %452 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %454 = loom.matmul %453, %77 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %455 = loom.add %430, %454 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %456 = loom.cast %455 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %457 = loom.pow %456, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %458 = loom.reduce  mean %457 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %459 = loom.add %458, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %460 = loom.sqrt %459 : tensor<1x2048x1xf32>
    %461 = loom.reciprocal %460 : tensor<1x2048x1xf32>
    %462 = loom.mul %456, %461 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %463 = loom.cast %462 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %464 = loom.mul %463, %76 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %465 = loom.matmul %464, %75 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %466 = loom.silu %465 : tensor<1x2048x8192xf32>
    %467 = loom.matmul %464, %74 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %468 = loom.mul %466, %467 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %469 = loom.matmul %468, %73 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %470 = loom.add %455, %469 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %471 = loom.cast %470 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %472 = loom.pow %471, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %473 = loom.reduce  mean %472 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %474 = loom.add %473, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %475 = loom.sqrt %474 : tensor<1x2048x1xf32>
    %476 = loom.reciprocal %475 : tensor<1x2048x1xf32>
    %477 = loom.mul %471, %476 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %478 = loom.cast %477 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %479 = loom.mul %478, %72 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %480 = loom.matmul %479, %71 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %481 = loom.reshape %480 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %482 = loom.transpose %481 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %483 = loom.matmul %479, %70 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %484 = loom.reshape %483 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %485 = loom.transpose %484 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %486 = loom.matmul %479, %69 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %487 = loom.reshape %486 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %488 = loom.transpose %487 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %489 = loom.rotary %482, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %490 = loom.rotary %485, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %491, %lse491 = loom.attention %489, %490, %488 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %492 = loom.transpose %491 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %493 = loom.reshape %492 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %494 = loom.matmul %493, %68 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %495 = loom.add %470, %494 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %496 = loom.cast %495 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %497 = loom.pow %496, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %498 = loom.reduce  mean %497 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %499 = loom.add %498, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %500 = loom.sqrt %499 : tensor<1x2048x1xf32>
    %501 = loom.reciprocal %500 : tensor<1x2048x1xf32>
    %502 = loom.mul %496, %501 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %503 = loom.cast %502 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %504 = loom.mul %503, %67 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %505 = loom.matmul %504, %66 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %506 = loom.silu %505 : tensor<1x2048x8192xf32>
    %507 = loom.matmul %504, %65 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %508 = loom.mul %506, %507 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %509 = loom.matmul %508, %64 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %510 = loom.add %495, %509 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %511 = loom.cast %510 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %512 = loom.pow %511, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %513 = loom.reduce  mean %512 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %514 = loom.add %513, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %515 = loom.sqrt %514 : tensor<1x2048x1xf32>
    %516 = loom.reciprocal %515 : tensor<1x2048x1xf32>
    %517 = loom.mul %511, %516 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %518 = loom.cast %517 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %519 = loom.mul %518, %63 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %520 = loom.matmul %519, %62 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %521 = loom.reshape %520 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %522 = loom.transpose %521 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %523 = loom.matmul %519, %61 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %524 = loom.reshape %523 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %525 = loom.transpose %524 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %526 = loom.matmul %519, %60 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %527 = loom.reshape %526 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %528 = loom.transpose %527 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %529 = loom.rotary %522, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %530 = loom.rotary %525, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %531, %lse531 = loom.attention %529, %530, %528 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %532 = loom.transpose %531 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %533 = loom.reshape %532 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %534 = loom.matmul %533, %59 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %535 = loom.add %510, %534 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %536 = loom.cast %535 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %537 = loom.pow %536, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %538 = loom.reduce  mean %537 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %539 = loom.add %538, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %540 = loom.sqrt %539 : tensor<1x2048x1xf32>
    %541 = loom.reciprocal %540 : tensor<1x2048x1xf32>
    %542 = loom.mul %536, %541 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %543 = loom.cast %542 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %544 = loom.mul %543, %58 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %545 = loom.matmul %544, %57 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %546 = loom.silu %545 : tensor<1x2048x8192xf32>
    %547 = loom.matmul %544, %56 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %548 = loom.mul %546, %547 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %549 = loom.matmul %548, %55 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %550 = loom.add %535, %549 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %551 = loom.cast %550 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %552 = loom.pow %551, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %553 = loom.reduce  mean %552 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %554 = loom.add %553, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %555 = loom.sqrt %554 : tensor<1x2048x1xf32>
    %556 = loom.reciprocal %555 : tensor<1x2048x1xf32>
    %557 = loom.mul %551, %556 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %558 = loom.cast %557 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %559 = loom.mul %558, %54 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %560 = loom.matmul %559, %53 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %561 = loom.reshape %560 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %562 = loom.transpose %561 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %563 = loom.matmul %559, %52 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %564 = loom.reshape %563 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %565 = loom.transpose %564 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %566 = loom.matmul %559, %51 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %567 = loom.reshape %566 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %568 = loom.transpose %567 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %569 = loom.rotary %562, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %570 = loom.rotary %565, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %571, %lse571 = loom.attention %569, %570, %568 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %572 = loom.transpose %571 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %573 = loom.reshape %572 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %574 = loom.matmul %573, %50 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %575 = loom.add %550, %574 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %576 = loom.cast %575 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %577 = loom.pow %576, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %578 = loom.reduce  mean %577 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %579 = loom.add %578, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %580 = loom.sqrt %579 : tensor<1x2048x1xf32>
    %581 = loom.reciprocal %580 : tensor<1x2048x1xf32>
    %582 = loom.mul %576, %581 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %583 = loom.cast %582 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %584 = loom.mul %583, %49 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %585 = loom.matmul %584, %48 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %586 = loom.silu %585 : tensor<1x2048x8192xf32>
    %587 = loom.matmul %584, %47 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %588 = loom.mul %586, %587 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %589 = loom.matmul %588, %46 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %590 = loom.add %575, %589 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %591 = loom.cast %590 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %592 = loom.pow %591, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %593 = loom.reduce  mean %592 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %594 = loom.add %593, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %595 = loom.sqrt %594 : tensor<1x2048x1xf32>
    %596 = loom.reciprocal %595 : tensor<1x2048x1xf32>
    %597 = loom.mul %591, %596 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %598 = loom.cast %597 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %599 = loom.mul %598, %45 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %600 = loom.matmul %599, %44 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %601 = loom.reshape %600 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %602 = loom.transpose %601 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %603 = loom.matmul %599, %43 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %604 = loom.reshape %603 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %605 = loom.transpose %604 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %606 = loom.matmul %599, %42 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %607 = loom.reshape %606 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %608 = loom.transpose %607 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %609 = loom.rotary %602, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %610 = loom.rotary %605, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %611, %lse611 = loom.attention %609, %610, %608 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %612 = loom.transpose %611 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %613 = loom.reshape %612 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %614 = loom.matmul %613, %41 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %615 = loom.add %590, %614 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %616 = loom.cast %615 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %617 = loom.pow %616, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %618 = loom.reduce  mean %617 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %619 = loom.add %618, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %620 = loom.sqrt %619 : tensor<1x2048x1xf32>
    %621 = loom.reciprocal %620 : tensor<1x2048x1xf32>
    %622 = loom.mul %616, %621 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %623 = loom.cast %622 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %624 = loom.mul %623, %40 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %625 = loom.matmul %624, %39 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %626 = loom.silu %625 : tensor<1x2048x8192xf32>
    %627 = loom.matmul %624, %38 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %628 = loom.mul %626, %627 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %629 = loom.matmul %628, %37 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %630 = loom.add %615, %629 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %631 = loom.cast %630 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %632 = loom.pow %631, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %633 = loom.reduce  mean %632 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %634 = loom.add %633, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %635 = loom.sqrt %634 : tensor<1x2048x1xf32>
    %636 = loom.reciprocal %635 : tensor<1x2048x1xf32>
    %637 = loom.mul %631, %636 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %638 = loom.cast %637 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %639 = loom.mul %638, %36 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %640 = loom.matmul %639, %35 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %641 = loom.reshape %640 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %642 = loom.transpose %641 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %643 = loom.matmul %639, %34 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %644 = loom.reshape %643 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %645 = loom.transpose %644 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %646 = loom.matmul %639, %33 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %647 = loom.reshape %646 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %648 = loom.transpose %647 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %649 = loom.rotary %642, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %650 = loom.rotary %645, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %651, %lse651 = loom.attention %649, %650, %648 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %652 = loom.transpose %651 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %653 = loom.reshape %652 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %654 = loom.matmul %653, %32 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %655 = loom.add %630, %654 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %656 = loom.cast %655 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %657 = loom.pow %656, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %658 = loom.reduce  mean %657 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %659 = loom.add %658, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %660 = loom.sqrt %659 : tensor<1x2048x1xf32>
    %661 = loom.reciprocal %660 : tensor<1x2048x1xf32>
    %662 = loom.mul %656, %661 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %663 = loom.cast %662 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %664 = loom.mul %663, %31 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %665 = loom.matmul %664, %30 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %666 = loom.silu %665 : tensor<1x2048x8192xf32>
    %667 = loom.matmul %664, %29 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %668 = loom.mul %666, %667 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %669 = loom.matmul %668, %28 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %670 = loom.add %655, %669 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %671 = loom.cast %670 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %672 = loom.pow %671, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %673 = loom.reduce  mean %672 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %674 = loom.add %673, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %675 = loom.sqrt %674 : tensor<1x2048x1xf32>
    %676 = loom.reciprocal %675 : tensor<1x2048x1xf32>
    %677 = loom.mul %671, %676 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %678 = loom.cast %677 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %679 = loom.mul %678, %27 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %680 = loom.matmul %679, %26 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %681 = loom.reshape %680 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %682 = loom.transpose %681 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %683 = loom.matmul %679, %25 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %684 = loom.reshape %683 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %685 = loom.transpose %684 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %686 = loom.matmul %679, %24 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %687 = loom.reshape %686 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %688 = loom.transpose %687 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %689 = loom.rotary %682, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %690 = loom.rotary %685, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %691, %lse691 = loom.attention %689, %690, %688 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %692 = loom.transpose %691 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %693 = loom.reshape %692 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %694 = loom.matmul %693, %23 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %695 = loom.add %670, %694 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %696 = loom.cast %695 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %697 = loom.pow %696, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %698 = loom.reduce  mean %697 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %699 = loom.add %698, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %700 = loom.sqrt %699 : tensor<1x2048x1xf32>
    %701 = loom.reciprocal %700 : tensor<1x2048x1xf32>
    %702 = loom.mul %696, %701 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %703 = loom.cast %702 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %704 = loom.mul %703, %22 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %705 = loom.matmul %704, %21 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %706 = loom.silu %705 : tensor<1x2048x8192xf32>
    %707 = loom.matmul %704, %20 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %708 = loom.mul %706, %707 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %709 = loom.matmul %708, %19 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %710 = loom.add %695, %709 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %711 = loom.cast %710 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %712 = loom.pow %711, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %713 = loom.reduce  mean %712 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %714 = loom.add %713, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %715 = loom.sqrt %714 : tensor<1x2048x1xf32>
    %716 = loom.reciprocal %715 : tensor<1x2048x1xf32>
    %717 = loom.mul %711, %716 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %718 = loom.cast %717 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %719 = loom.mul %718, %18 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %720 = loom.matmul %719, %17 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %721 = loom.reshape %720 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %722 = loom.transpose %721 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %723 = loom.matmul %719, %16 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %724 = loom.reshape %723 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %725 = loom.transpose %724 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %726 = loom.matmul %719, %15 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %727 = loom.reshape %726 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %728 = loom.transpose %727 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %729 = loom.rotary %722, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %730 = loom.rotary %725, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %731, %lse731 = loom.attention %729, %730, %728 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %732 = loom.transpose %731 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %733 = loom.reshape %732 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %734 = loom.matmul %733, %14 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %735 = loom.add %710, %734 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %736 = loom.cast %735 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %737 = loom.pow %736, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %738 = loom.reduce  mean %737 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %739 = loom.add %738, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %740 = loom.sqrt %739 : tensor<1x2048x1xf32>
    %741 = loom.reciprocal %740 : tensor<1x2048x1xf32>
    %742 = loom.mul %736, %741 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %743 = loom.cast %742 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %744 = loom.mul %743, %13 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %745 = loom.matmul %744, %12 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %746 = loom.silu %745 : tensor<1x2048x8192xf32>
    %747 = loom.matmul %744, %11 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %748 = loom.mul %746, %747 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %749 = loom.matmul %748, %10 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %750 = loom.add %735, %749 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %751 = loom.cast %750 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %752 = loom.pow %751, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %753 = loom.reduce  mean %752 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %754 = loom.add %753, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %755 = loom.sqrt %754 : tensor<1x2048x1xf32>
    %756 = loom.reciprocal %755 : tensor<1x2048x1xf32>
    %757 = loom.mul %751, %756 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %758 = loom.cast %757 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %759 = loom.mul %758, %9 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %760 = loom.matmul %759, %8 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %761 = loom.reshape %760 : tensor<1x2048x2048xf32> -> tensor<1x2048x32x64xf32>
    %762 = loom.transpose %761 [0, 2, 1, 3] : tensor<1x2048x32x64xf32>
    %763 = loom.matmul %759, %7 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %764 = loom.reshape %763 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %765 = loom.transpose %764 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %766 = loom.matmul %759, %6 : tensor<1x2048x2048xf32>, tensor<2048x512xf32>
    %767 = loom.reshape %766 : tensor<1x2048x512xf32> -> tensor<1x2048x8x64xf32>
    %768 = loom.transpose %767 [0, 2, 1, 3] : tensor<1x2048x8x64xf32>
    %769 = loom.rotary %762, %142, %141 : tensor<1x32x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %770 = loom.rotary %765, %142, %141 : tensor<1x8x2048x64xf32>, tensor<1x1x2048x64xf32>, tensor<1x1x2048x64xf32>
    %771, %lse771 = loom.attention %769, %770, %768 {causal = true, scale = 1.250000e-01 : f64} : tensor<1x32x2048x64xf32>, tensor<1x8x2048x64xf32>, tensor<1x8x2048x64xf32>
    %772 = loom.transpose %771 [0, 2, 1, 3] : tensor<1x32x2048x64xf32>
    %773 = loom.reshape %772 : tensor<1x2048x32x64xf32> -> tensor<1x2048x2048xf32>
    %774 = loom.matmul %773, %5 : tensor<1x2048x2048xf32>, tensor<2048x2048xf32>
    %775 = loom.add %750, %774 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %776 = loom.cast %775 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %777 = loom.pow %776, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %778 = loom.reduce  mean %777 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %779 = loom.add %778, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %780 = loom.sqrt %779 : tensor<1x2048x1xf32>
    %781 = loom.reciprocal %780 : tensor<1x2048x1xf32>
    %782 = loom.mul %776, %781 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %783 = loom.cast %782 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %784 = loom.mul %783, %4 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %785 = loom.matmul %784, %3 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %786 = loom.silu %785 : tensor<1x2048x8192xf32>
    %787 = loom.matmul %784, %2 : tensor<1x2048x2048xf32>, tensor<2048x8192xf32>
    %788 = loom.mul %786, %787 : tensor<1x2048x8192xf32>, tensor<1x2048x8192xf32>
    %789 = loom.matmul %788, %1 : tensor<1x2048x8192xf32>, tensor<8192x2048xf32>
    %790 = loom.add %775, %789 : tensor<1x2048x2048xf32>, tensor<1x2048x2048xf32>
    %791 = loom.cast %790 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %792 = loom.pow %791, %148 : tensor<1x2048x2048xf32>, tensor<f32>
    %793 = loom.reduce  mean %792 {axes = array<i64: 2>} : tensor<1x2048x2048xf32>
    %794 = loom.add %793, %147 : tensor<1x2048x1xf32>, tensor<f32>
    %795 = loom.sqrt %794 : tensor<1x2048x1xf32>
    %796 = loom.reciprocal %795 : tensor<1x2048x1xf32>
    %797 = loom.mul %791, %796 : tensor<1x2048x2048xf32>, tensor<1x2048x1xf32>
    %798 = loom.cast %797 : tensor<1x2048x2048xf32> -> tensor<1x2048x2048xf32>
    %799 = loom.mul %798, %0 : tensor<1x2048x2048xf32>, tensor<2048xf32>
    %800 = loom.matmul %799, %149 {transpose_rhs = true} : tensor<1x2048x2048xf32>, tensor<128256x2048xf32>
    return %800 : tensor<1x2048x128256xf32>
  }
}


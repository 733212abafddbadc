// Reading a config.json family by family as transformers 5.17 builds it (hf_families.cpp), and refusing by name
// what zsim does not build.
#include <gtest/gtest.h>

#include "sim/common/error.hpp"
#include "sim/scenario/hf_config.hpp"
#include "sim/scenario/yaml_document.hpp"

namespace zsim {
namespace {

ModelSpec read(const std::string& json) { return model_from_hf_config(parse_yaml_text(json, "config.json"), "config.json", "m"); }

// The error a config.json raises (the test fails if it raises none).
InputError error_of(const std::string& json) {
  try {
    read(json);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << json;
  return InputError({}, "");
}

const std::string kDims = R"("hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 16,
  "num_key_value_heads": 8, "intermediate_size": 3072, "vocab_size": 1000)";

TEST(HfFamilies, Qwen3TakesItsConfigClassesHeadDimWhenTheFileOmitsIt) {
  const ModelSpec m = read(R"({"model_type": "qwen3", )" + kDims + "}");
  EXPECT_EQ(head_dim(m), 128);  // Qwen3Config.head_dim = 128, not 1024 / 16
  EXPECT_EQ(m.arch.qk_norm, QkNorm::per_head);
}

TEST(HfFamilies, HeadDimFromTheFileWinsOverHiddenOverHeads) {
  EXPECT_EQ(head_dim(read(R"({"model_type": "mistral", "head_dim": 128, )" + kDims + "}")), 128);
  EXPECT_EQ(head_dim(read(R"({"model_type": "mistral", )" + kDims + "}")), 64);
}

TEST(HfFamilies, Qwen2HasBiasesOnQKVOnly) {
  const ModelSpec m = read(R"({"model_type": "qwen2", )" + kDims + "}");
  EXPECT_TRUE(m.arch.qkv_bias);
  EXPECT_FALSE(m.arch.o_bias);
  EXPECT_FALSE(m.arch.mlp_bias);
  EXPECT_FALSE(m.bias);
}

TEST(HfFamilies, Gpt2DropoutsTakeGpt2ConfigsDefaultsWhenAbsent) {
  const ModelSpec m = read(R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100})");
  EXPECT_DOUBLE_EQ(m.attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(m.arch.embedding_dropout, 0.1);
  EXPECT_EQ(m.max_position_embeddings, 1024);  // n_positions default
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_TRUE(m.arch.fused_qkv);
}

TEST(HfFamilies, GemmaTiesItsHeadAndScalesNormsByOnePlusWeight) {
  const ModelSpec m = read(R"({"model_type": "gemma2", )" + kDims + "}");
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_EQ(head_dim(m), 256);
  EXPECT_EQ(m.arch.norm, NormKind::rms_gemma);
  EXPECT_EQ(m.arch.block, BlockKind::sandwich);
  EXPECT_EQ(m.arch.act, ActKind::gelu_tanh);
}

TEST(HfFamilies, OptsPositionTableHasTwoExtraRowsAndItsDropoutDefaultsToOneTenth) {
  const ModelSpec m = read(R"({"model_type": "opt", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "ffn_dim": 256, "vocab_size": 100, "max_position_embeddings": 2048})");
  EXPECT_EQ(m.arch.position_offset, 2);
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.1);
  EXPECT_EQ(m.arch.act, ActKind::relu);
}

TEST(HfFamilies, ExpertsInAFamilyWithoutThemAreRefusedAtTheirKey) {
  const InputError e = error_of("{\"model_type\": \"llama\",\n  \"num_local_experts\": 8, " + kDims + "}");
  EXPECT_EQ(e.where().key_path, "num_local_experts");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_NE(std::string(e.what()).find("mixture of experts"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("Supported model types: "), std::string::npos) << e.what();
}

TEST(HfFamilies, MixtralReadsItsExpertsAndTheirDefaults) {
  const ModelSpec m = read(R"({"model_type": "mixtral", "num_local_experts": 8, )" + kDims + "}");
  EXPECT_EQ(m.arch.experts, 8);
  EXPECT_EQ(m.arch.experts_per_token, 2);  // MixtralConfig.num_experts_per_tok
  EXPECT_EQ(m.arch.expert_ffn, 3072);      // each expert intermediate_size wide
  EXPECT_TRUE(m.arch.router_weights_fp32);
}

TEST(HfFamilies, Qwen3MoeTakesMoeIntermediateSizeAndRefusesDenseLayersAmongSparseOnes) {
  const ModelSpec m = read(R"({"model_type": "qwen3_moe", "num_experts": 64, "moe_intermediate_size": 256, )" + kDims + "}");
  EXPECT_EQ(m.arch.experts, 64);
  EXPECT_EQ(m.arch.experts_per_token, 8);
  EXPECT_EQ(m.arch.expert_ffn, 256);
  EXPECT_FALSE(m.arch.norm_topk_prob);  // Qwen3MoeConfig default
  const InputError e = error_of(R"({"model_type": "qwen3_moe", "mlp_only_layers": [0], )" + kDims + "}");
  EXPECT_EQ(e.where().key_path, "mlp_only_layers");
}

TEST(HfFamilies, LatentAttentionIsRefusedAtItsKey) {
  const InputError e = error_of(R"({"model_type": "deepseek_v2", "kv_lora_rank": 512, )" + kDims + "}");
  EXPECT_EQ(e.where().key_path, "kv_lora_rank");
  EXPECT_NE(std::string(e.what()).find("latent attention"), std::string::npos) << e.what();
}

TEST(HfFamilies, AnUnknownModelTypeIsRefusedWithTheSupportedOnes) {
  const InputError e = error_of(R"({"model_type": "mamba", )" + kDims + "}");
  EXPECT_EQ(e.where().key_path, "model_type");
  EXPECT_NE(std::string(e.what()).find("'mamba' is not modelled"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("llama"), std::string::npos) << e.what();
}

TEST(HfFamilies, AConfigWithoutModelTypeIsRefused) {
  EXPECT_EQ(error_of("{" + kDims + "}").where().key_path, "model_type");
}

TEST(HfFamilies, OptsProjectionToAnotherEmbeddingWidthIsRefused) {
  const InputError e = error_of(R"({"model_type": "opt", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "ffn_dim": 256, "vocab_size": 100, "word_embed_proj_dim": 32})");
  EXPECT_EQ(e.where().key_path, "word_embed_proj_dim");
}

}  // namespace
}  // namespace zsim

// A model as a GGUF file for llama.cpp / Ollama, laid out as llama.cpp's convert_hf_to_gguf.py lays out an
// HF checkpoint of the same family:
//   - architecture "llama" for LlamaForCausalLM and MistralForCausalLM, with llama.cpp's tensor names
//     (token_embd, blk.N.attn_norm / attn_q / attn_k / attn_v / attn_output / ffn_norm / ffn_gate / ffn_up /
//     ffn_down, output_norm, output; no output tensor when the embeddings are tied);
//   - attn_q and attn_k rows permuted from HF's rotate-half RoPE layout back to the interleaved pairs
//     llama.cpp's RoPE reads (convert_hf_to_gguf's LlamaModel.permute, with KVH heads for K);
//   - 1-D tensors (norms) in f32, every other tensor in the asked type (q8_0: tensors whose rows are not a
//     multiple of 32 fall back to f16, as the converter's quantize does);
//   - the hyperparameters llama.cpp reads (llama.context_length, embedding_length, block_count,
//     feed_forward_length, rope.dimension_count, attention.head_count / head_count_kv /
//     layer_norm_rms_epsilon, rope.freq_base, vocab_size; key/value_length when HD != D / H), general.*;
//   - the tokenizer from a SentencePiece tokenizer.model (tokenizer.ggml.model "llama": tokens, scores,
//     token types as the converter takes them from sentencepiece, padded with [PADi] up to config.json's
//     vocab_size), config.json's special ids, add_bos/add_eos from tokenizer_config.json, and its
//     chat_template.
// Qwen2ForCausalLM and Qwen3ForCausalLM as the converter's Qwen2Model / Qwen3Model lay them out
// (gguf_export_qwen.cpp): architecture "qwen2" / "qwen3" with {arch}.* hyperparameters (key/value_length
// for Qwen3, whose config.json names head_dim), Q and K as stored (llama.cpp runs Qwen's RoPE in HF's NEOX
// layout), the q/k/v biases as attn_q.bias / attn_k.bias / attn_v.bias, Qwen3's attn_q_norm / attn_k_norm;
// the vocabulary from tokenizer.json as _set_vocab_gpt2 takes it (tokenizer.ggml.model "gpt2", pre
// "qwen2", tokens in id order with added special tokens CONTROL, the merges).
// Phi3ForCausalLM as the converter's Phi3MiniModel lays it out (gguf_export_phi3.cpp): architecture "phi3"
// with phi3.* hyperparameters (rope.scaling.original_context_length, rope.dimension_count of the rotated
// dims, attention.sliding_window, 0 without one), qkv_proj kept fused as attn_qkv and gate_up_proj as
// ffn_up (rows gate then up), Q/K not permuted; the SentencePiece vocabulary padded with [PADi] at score
// -10000 and the added tokens of added_tokens.json, tokenizer_config.json and tokenizer.json.
// Gemma2ForCausalLM as the converter's Gemma2Model lays it out (gguf_export_gemma2.cpp): architecture
// "gemma2" with gemma2.* hyperparameters (key/value_length, attn_logit_softcapping, final_logit_softcapping,
// attention.sliding_window; no rope.freq_base), every RMSNorm weight plus 1 (llama.cpp multiplies by w where
// HF multiplies by 1 + w) under llama.cpp's names (attn_norm, post_attention_norm, ffn_norm, post_ffw_norm,
// output_norm), Q/K as stored, no output tensor (tied); the SentencePiece vocabulary as for Llama, then
// add_space_prefix false. What llama.cpp's gemma2 cannot run as trained is refused by name (attention biases,
// an untied head, a RoPE base other than 10000, null soft-caps, another sliding-window layout, a
// query_pre_attn_scalar other than the one llama.cpp derives).
// Gemma3ForCausalLM (text) as the converter's Gemma3Model lays it out (gguf_export_gemma3.cpp): architecture
// "gemma3" with gemma3.* hyperparameters (key/value_length, rope.freq_base of the global layers and their
// linear rope.scaling when set, attention.sliding_window), every RMSNorm weight plus 1 (attn_q_norm and
// attn_k_norm too), Q/K as stored, no output tensor (tied); the SentencePiece vocabulary as for Gemma 2.
// Refused by name: what llama.cpp's gemma3 hard-codes otherwise (attention biases, an untied head, a local
// RoPE base other than 10000, soft-caps, another sliding-window pattern than five sliding then one global,
// a query_pre_attn_scalar other than the one llama.cpp derives).
// BloomForCausalLM as the converter's BloomModel lays it out (gguf_export_bloom.cpp): architecture "bloom"
// with bloom.* hyperparameters (context_length = config.json's seq_length, else hidden_size, as the converter
// takes it; feed_forward_length 4 D; attention.layer_norm_epsilon), token_embd_norm, attn_qkv rows all q then
// all k then v (the converter's re-order of BLOOM's per-head interleave, which is the engine's layout),
// biases on every norm and projection, output only when untied; no positions (llama.cpp's BLOOM is ALiBi);
// the BPE vocabulary with pre "bloom", recognized by BLOOM's Split regex. Llama 3.x: its RoPE scaling as
// llama.cpp's rope_freqs.weight (the converter's float32 factors, the first tensor) and, without a
// tokenizer.model, its BPE tokenizer.json as _set_vocab_gpt2 takes it (pre "llama-bpe", given when the
// pre-tokenizer's Split regex is Llama 3's). Not yet, refused by name: Phi-3's LongRoPE (its factor tensors),
// Phi-4's GPT-2 tokenizer, other BPE pre-tokenizers.
#pragma once

#include <string>

#include "io/gguf_writer.h"
#include "model/config.h"
#include "model/weights.h"

namespace lt::cli {

// "f32", "f16", "bf16", "q8_0"; "" = the model's 16-bit dtype (bf16 for bfloat16, else f16, as the
// converter's default outtype for float32 checkpoints); anything else is refused listing the names.
io::GgmlType gguf_type_from_name(const std::string& name, const model::ModelConfig& config);

// Refuses, before any weight is read, what the family's GGUF cannot hold as the model was trained (Gemma 2's
// settings llama.cpp hard-codes, a BLOOM tokenizer.json that is not BLOOM's); write_gguf_model checks it too.
void check_gguf_exportable(const std::string& model_dir, const model::ModelConfig& config);
// Writes `weights` (host f32, of the model in `model_dir`, whose tokenizer and tokenizer_config.json are
// read) to `path`.
void write_gguf_model(const std::string& path, const std::string& model_dir, const model::ModelConfig& config,
                      const model::ModelWeights& weights, io::GgmlType type);
// tokenizer.json as the converter's _set_vocab_gpt2 takes it: every id below vocab_size in order (the
// model's vocabulary, then added tokens: special ones CONTROL, others USER_DEFINED; holes [PADi] UNUSED),
// tokenizer.ggml.pre `pre` (llama.cpp's name of the pre-tokenizer), the merges as "a b" strings, then the
// special-token keys.
void add_bpe_tokenizer(io::GgufWriter& w, const std::string& model_dir, const model::ModelConfig& config,
                       const std::string& pre);
// _create_vocab_sentencepiece from tokenizer.model (refused without one): tokens, scores and token types
// padded with [PADi] up to config.json's vocab_size, added_tokens.json and tokenizer_config.json's
// added_tokens_decoder over them (special or special-looking: CONTROL), then the special-token keys.
void add_sentencepiece_tokenizer(io::GgufWriter& w, const std::string& model_dir,
                                 const model::ModelConfig& config);
// The Split regex of tokenizer.json's pre-tokenizer (the last, in a Sequence), "" without one: what
// llama.cpp's name for the pre-tokenizer (tokenizer.ggml.pre) is recognized by.
std::string tokenizer_split_regex(const std::string& model_dir);
// The Gemma 2, Gemma 3 and BLOOM parts of check_gguf_exportable.
void check_gemma2_exportable(const model::ModelConfig& config);
void check_gemma3_exportable(const model::ModelConfig& config);
void check_bloom_exportable(const std::string& model_dir);
// The Gemma 2 part of write_gguf_model.
void write_gemma2_gguf(const std::string& path, const std::string& model_dir,
                       const model::ModelConfig& config, const model::ModelWeights& weights,
                       io::GgmlType type);
// Gemma 2 / 3 tensors under llama.cpp's names, every RMSNorm weight plus 1, Q/K as stored, no output
// (tied); attn_q_norm / attn_k_norm after attn_v when the block has them.
void add_gemma_tensors(io::GgufWriter& w, io::GgmlType type, const model::ModelConfig& config,
                       const model::ModelWeights& weights);
// The Gemma 3 part of write_gguf_model.
void write_gemma3_gguf(const std::string& path, const std::string& model_dir,
                       const model::ModelConfig& config, const model::ModelWeights& weights,
                       io::GgmlType type);
// The BLOOM part of write_gguf_model.
void write_bloom_gguf(const std::string& path, const std::string& model_dir, const model::ModelConfig& config,
                      const model::ModelWeights& weights, io::GgmlType type);
// The Phi-3 part of write_gguf_model.
void write_phi3_gguf(const std::string& path, const std::string& model_dir, const model::ModelConfig& config,
                     const model::ModelWeights& weights, io::GgmlType type);
// The Qwen2 / Qwen3 part of write_gguf_model.
void write_qwen_gguf(const std::string& path, const std::string& model_dir, const model::ModelConfig& config,
                     const model::ModelWeights& weights, io::GgmlType type);

}  // namespace lt::cli

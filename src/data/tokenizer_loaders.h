// The file-format readers behind load_tokenizer(); each builds a PipelineTokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "data/tokenizer.h"

namespace lt::data {

// Bounds on what a tokenizer file may declare: no real vocabulary comes near them, and each keeps a hostile
// file from costing more than a moment to load.
constexpr size_t kMaxTokenBytes = size_t(16) << 10;   // one token, piece or added token
constexpr int64_t kMaxVocabulary = int64_t(1) << 24;  // ids are in [0, 2^24)
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t(1) << 30;

// The whole file (regular files only, at most kMaxTokenizerFileBytes); errors name the path.
std::string read_tokenizer_file(const std::string& path);
// A tokenizer JSON file (tokenizer.json, vocab.json), depth-checked; "<what> <path>: not valid JSON ...".
nlohmann::json read_tokenizer_json(const std::string& path, const char* what = "tokenizer.json");
// Refuses a token longer than kMaxTokenBytes, naming the file, `what` and the token's start.
void check_token_length(std::string_view token, const std::string& path, const char* what);

// HF tokenizer.json (model type BPE).
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);
// tiktoken rank file (Llama 3): "base64 rank" lines; `content` is the file's bytes.
std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path, const std::string& content);
// SentencePiece ModelProto (BPE models only).
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path, const std::string& content);
// GPT-2 style vocab.json (or encoder.json) + merges.txt (or vocab.bpe); Qwen2 when the folder's
// config.json says so or the vocabulary is Qwen2's.
std::unique_ptr<Tokenizer> load_gpt2_files(const std::string& vocab_path, const std::string& merges_path);

}  // namespace lt::data

// The file-format readers behind load_tokenizer(); each builds a PipelineTokenizer.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace lt::data {

std::string read_tokenizer_file(const std::string& path);

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

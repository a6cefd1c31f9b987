// A SentencePiece .model file's vocabulary as stored: every piece with its score and type, and the
// special ids of its TrainerSpec. What model files for other runtimes (GGUF's tokenizer.ggml.tokens,
// scores and token_type) carry, as llama.cpp's converter reads them with sentencepiece.
#pragma once

#include <string>
#include <vector>

namespace lt::data {

struct SentencePieceEntry {
  std::string piece;  // as stored ("▁the", "<0x0A>", "<s>")
  float score = 0;
  int type = 1;  // SentencePiece's: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte
};

struct SentencePieceVocab {
  std::vector<SentencePieceEntry> pieces;               // by id
  int unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  // -1: none
};

// Reads `path` (a SentencePiece ModelProto); errors name the file.
SentencePieceVocab read_sentencepiece_vocab(const std::string& path);

}  // namespace lt::data

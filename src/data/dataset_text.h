// Plain text for continued pre-training: a .txt file, or JSON/JSONL records {"text": "..."} (HF datasets'
// text column; one record is one document, other fields ignored).
//
// Documents: with TextSplit::paragraph (default) a document is a run of non-blank lines, documents being
// separated by one or more blank (whitespace-only) lines, and its lines are joined with "\n"; with
// TextSplit::line every non-blank line is a document. Each document becomes BOS (if the tokenizer adds
// one) + tokens + EOS (if the tokenizer defines one), and every token is a label.
//
// Long documents are cut into chunks of cutoff_len tokens that overlap by one token (stride cutoff_len-1):
// the first token of a chunk is the last of the previous one, so every token after the document's first is
// predicted exactly once (labels[0] of a chunk is never scored). A trailing piece of a single token has
// nothing to predict and is not emitted.
#pragma once

#include <string>
#include <vector>

#include "data/dataset_types.h"
#include "data/tokenizer.h"

namespace lt::data {

// The documents of `text`, in order.
std::vector<std::string> split_documents(const std::string& text, TextSplit split);

// One document's ids cut as described above; each chunk has 2..cutoff_len tokens.
std::vector<Example> chunk_document(const std::vector<int32_t>& ids, int64_t cutoff_len);

Dataset load_text(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options);

}  // namespace lt::data

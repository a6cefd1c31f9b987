#include "data/dataset_text.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"

namespace lt::data {

std::vector<std::string> split_documents(const std::string& text, TextSplit split) {
  std::vector<std::string> documents;
  std::string current;
  bool open = false;
  auto close = [&] {
    if (open) documents.push_back(std::move(current));
    current.clear();
    open = false;
  };
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    bool blank = line.find_first_not_of(" \t\f\v") == std::string::npos;
    if (blank) {
      close();
      continue;
    }
    if (split == TextSplit::line) {
      documents.push_back(line);
      continue;
    }
    if (open) current += "\n";
    current += line;
    open = true;
  }
  close();
  return documents;
}

std::vector<Example> chunk_document(const std::vector<int32_t>& ids, int64_t cutoff_len) {
  LT_CHECK(cutoff_len >= 2, "cutoff_len is {}, expected at least 2", cutoff_len);
  std::vector<Example> chunks;
  size_t length = size_t(cutoff_len), stride = length - 1;
  for (size_t start = 0; start + 1 < ids.size(); start += stride) {
    size_t end = std::min(ids.size(), start + length);
    Example chunk;
    chunk.input_ids.assign(ids.begin() + long(start), ids.begin() + long(end));
    chunk.labels = chunk.input_ids;
    chunks.push_back(std::move(chunk));
    if (end == ids.size()) break;
  }
  return chunks;
}

namespace {

bool is_json_text_path(const std::string& path) {
  return is_jsonl_path(path) || (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0);
}

}  // namespace

// A text dataset is tokenized whole; larger corpora belong in pre-tokenized form.
constexpr uint64_t kMaxTextDatasetBytes = uint64_t(4) << 30;

Dataset load_text(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options) {
  Dataset dataset;
  dataset.source = path;
  std::optional<int32_t> bos = tokenizer.adds_bos() ? tokenizer.bos_id() : std::nullopt;
  std::optional<int32_t> eos = tokenizer.eos_id();
  auto add_document = [&](const std::string& document) {
    std::vector<int32_t> ids;  // (T) the whole document
    if (bos) ids.push_back(*bos);
    std::vector<int32_t> body = tokenizer.encode(document, /*allow_special=*/false);
    ids.insert(ids.end(), body.begin(), body.end());
    if (eos) ids.push_back(*eos);
    std::vector<Example> chunks = chunk_document(ids, options.cutoff_len);
    dataset.stats.records += 1;
    dataset.stats.truncated += chunks.size() > 1;
    for (Example& chunk : chunks) {
      account_example(dataset.stats, chunk);
      dataset.examples.push_back(std::move(chunk));
    }
  };
  BadRecords bad(options.on_bad_record);
  if (is_json_text_path(path)) {
    for_each_json_record(path, bad, [&](const std::string&, const nlohmann::json& record) {
      require_object(record);
      add_document(string_field(record, "text"));
    });
  } else {
    std::stringstream buffer(read_input_file(path, kMaxTextDatasetBytes, "dataset"));
    for (const std::string& document : split_documents(buffer.str(), options.text_split))
      add_document(document);
  }
  finish_dataset(dataset, bad);
  return dataset;
}

}  // namespace lt::data

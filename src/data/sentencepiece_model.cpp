// SentencePiece .model files: a protobuf ModelProto, read here with a reader for only the fields needed.
// BPE models only: SentencePiece BPE merges the adjacent pair whose concatenation is the piece of highest
// score (leftmost on ties), so pieces are ranked by score and every split of a piece into two pieces
// becomes a pair for the BPE core.
#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "data/bpe_builder.h"
#include "data/sentencepiece_vocab.h"
#include "data/tokenizer_loaders.h"
#include "data/tokenizer_pipeline.h"

namespace lt::data {
namespace {

// Protobuf wire format: a field is a varint key (number << 3 | wire type) and a value.
class ProtoReader {
 public:
  ProtoReader(std::string_view data, const std::string& path, std::string_view message)
      : data_(data), path_(path), message_(message) {}

  bool done() const { return pos_ >= data_.size(); }
  // Reads the next key; returns the field number, sets the wire type.
  uint32_t next_field(int& wire) {
    uint64_t key = varint();
    wire = int(key & 7);
    return uint32_t(key >> 3);
  }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      check_available(1);
      auto byte = static_cast<unsigned char>(data_[pos_++]);
      value |= uint64_t(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return value;
    }
    LT_FAIL("SentencePiece model {}: malformed varint in {} at byte {}", path_, message_, pos_);
  }
  std::string_view bytes() {
    uint64_t length = varint();
    check_available(length);
    std::string_view out = data_.substr(pos_, length);
    pos_ += length;
    return out;
  }
  float fixed32_float() {
    check_available(4);
    uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits |= uint32_t(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    pos_ += 4;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  void skip(int wire, uint32_t field) {
    switch (wire) {
      case 0:
        varint();
        break;
      case 1:
        check_available(8), pos_ += 8;
        break;
      case 2:
        bytes();
        break;
      case 5:
        check_available(4), pos_ += 4;
        break;
      default:
        LT_FAIL(
            "SentencePiece model {}: field {} of {} has wire type {}, which protobuf does not define "
            "(the file is corrupt or not a SentencePiece model)",
            path_, field, message_, wire);
    }
  }
  void expect(int wire, int want, uint32_t field) {
    LT_CHECK(wire == want, "SentencePiece model {}: field {} of {} has wire type {}, expected {}", path_,
             field, message_, wire, want);
  }

 private:
  void check_available(uint64_t n) {
    LT_CHECK(n <= data_.size() - pos_,
             "SentencePiece model {}: truncated protobuf: {} needs {} more bytes at byte {} "
             "but only {} remain",
             path_, message_, n, pos_, data_.size() - pos_);
  }
  std::string_view data_;
  size_t pos_ = 0;
  const std::string& path_;
  std::string_view message_;
};

enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct Piece {
  std::string text;
  float score = 0;
  int type = kNormal;
};

struct ModelProto {
  std::vector<Piece> pieces;
  int model_type = 1;  // UNIGRAM by default
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  int unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  std::string unk_surface = " \xE2\x81\x87 ";
  std::string normalizer_name;
  bool has_charsmap = false;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
};

Piece parse_piece(std::string_view data, const std::string& path) {
  ProtoReader r(data, path, "SentencePiece");
  Piece p;
  while (!r.done()) {
    int wire;
    uint32_t field = r.next_field(wire);
    if (field == 1) {
      r.expect(wire, 2, field);
      p.text = std::string(r.bytes());
    } else if (field == 2) {
      r.expect(wire, 5, field);
      p.score = r.fixed32_float();
    } else if (field == 3) {
      r.expect(wire, 0, field);
      p.type = int(r.varint());
    } else {
      r.skip(wire, field);
    }
  }
  return p;
}

void parse_trainer_spec(std::string_view data, const std::string& path, ModelProto& m) {
  ProtoReader r(data, path, "TrainerSpec");
  while (!r.done()) {
    int wire;
    uint32_t field = r.next_field(wire);
    auto as_int = [&] {
      r.expect(wire, 0, field);
      return int(int32_t(r.varint()));
    };
    switch (field) {
      case 3:
        m.model_type = as_int();
        break;
      case 24:
        m.treat_whitespace_as_suffix = as_int() != 0;
        break;
      case 35:
        m.byte_fallback = as_int() != 0;
        break;
      case 40:
        m.unk_id = as_int();
        break;
      case 41:
        m.bos_id = as_int();
        break;
      case 42:
        m.eos_id = as_int();
        break;
      case 43:
        m.pad_id = as_int();
        break;
      case 44:
        r.expect(wire, 2, field);
        m.unk_surface = std::string(r.bytes());
        break;
      default:
        r.skip(wire, field);
    }
  }
}

void parse_normalizer_spec(std::string_view data, const std::string& path, ModelProto& m) {
  ProtoReader r(data, path, "NormalizerSpec");
  while (!r.done()) {
    int wire;
    uint32_t field = r.next_field(wire);
    if (field == 1 || field == 2) {
      r.expect(wire, 2, field);
      std::string_view value = r.bytes();
      if (field == 1) m.normalizer_name = std::string(value);
      if (field == 2) m.has_charsmap = !value.empty();
    } else if (field >= 3 && field <= 5) {
      r.expect(wire, 0, field);
      bool on = r.varint() != 0;
      (field == 3 ? m.add_dummy_prefix : field == 4 ? m.remove_extra_whitespaces : m.escape_whitespaces) = on;
    } else {
      r.skip(wire, field);
    }
  }
}

ModelProto parse_model(const std::string& content, const std::string& path) {
  ProtoReader r(content, path, "ModelProto");
  ModelProto m;
  while (!r.done()) {
    int wire;
    uint32_t field = r.next_field(wire);
    if (field >= 1 && field <= 3) {
      r.expect(wire, 2, field);
      std::string_view sub = r.bytes();
      if (field == 1) m.pieces.push_back(parse_piece(sub, path));
      if (field == 2) parse_trainer_spec(sub, path, m);
      if (field == 3) parse_normalizer_spec(sub, path, m);
    } else {
      r.skip(wire, field);
    }
  }
  return m;
}

const char* model_type_name(int type) {
  switch (type) {
    case 1:
      return "UNIGRAM";
    case 2:
      return "BPE";
    case 3:
      return "WORD";
    case 4:
      return "CHAR";
    default:
      return "unknown";
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path, const std::string& content) {
  ModelProto m = parse_model(content, path);
  LT_CHECK(!m.pieces.empty(), "SentencePiece model {}: no pieces (is this a SentencePiece .model file?)",
           path);
  LT_CHECK(m.model_type == 2,
           "SentencePiece model {}: model_type is {} ({}); leantune reads BPE models only "
           "(Llama 2 style); convert a unigram model to tokenizer.json with transformers instead",
           path, model_type_name(m.model_type), m.model_type);
  LT_CHECK(!m.treat_whitespace_as_suffix,
           "SentencePiece model {}: treat_whitespace_as_suffix is not supported", path);
  LT_CHECK(!m.has_charsmap,
           "SentencePiece model {}: normalizer '{}' uses a precompiled character map, which "
           "leantune does not support (only the identity rule of Llama 2 models)",
           path, m.normalizer_name);

  PipelineSpec spec;
  spec.origin = path;
  spec.model = std::make_unique<BpeModel>(BpeModel::Units::kUtf8Chars);
  BpeModel& model = *spec.model;
  size_t n = m.pieces.size();
  spec.id_to_token.resize(n);
  spec.is_control.assign(n, 0);
  spec.byte_piece.assign(n, -1);
  std::array<int32_t, 256> byte_ids;
  byte_ids.fill(-1);
  // Ranks: distinct scores, highest first; equal scores share a rank and then merge leftmost first.
  std::vector<float> scores;
  for (size_t id = 0; id < n; ++id) {
    const Piece& p = m.pieces[id];
    check_token_length(p.text, "SentencePiece model " + path, "piece");
    spec.id_to_token[id] = p.text;
    switch (p.type) {
      case kNormal:
        model.add_token(p.text, int32_t(id));
        scores.push_back(p.score);
        break;
      case kUserDefined:
        // Matched whole before BPE, like HF's conversion of user-defined symbols to added tokens.
        spec.added.push_back({p.text, int32_t(id), false});
        break;
      case kControl:
      case kUnknown:
        spec.is_control[id] = p.type == kControl;
        spec.added.push_back({p.text, int32_t(id), true});
        break;
      case kByte: {
        int value = -1;
        if (p.text.size() == 6 && p.text.starts_with("<0x") && p.text[5] == '>') {
          value = int(std::strtol(p.text.substr(3, 2).c_str(), nullptr, 16));
        }
        LT_CHECK(value >= 0 && value < 256, "SentencePiece model {}: byte piece {} is '{}', expected <0xNN>",
                 path, id, p.text);
        spec.byte_piece[id] = int16_t(value);
        byte_ids[value] = int32_t(id);
        break;
      }
      case kUnused:
        LT_FAIL(
            "SentencePiece model {}: piece {} '{}' is UNUSED; leantune does not support unused pieces in BPE "
            "models",
            path, id, p.text);
      default:
        LT_FAIL("SentencePiece model {}: piece {} '{}' has type {}, expected 1..6", path, id, p.text, p.type);
    }
  }
  std::sort(scores.begin(), scores.end(), std::greater<>());
  SplitMergeDeriver deriver(model, "SentencePiece model " + path);
  scores.erase(std::unique(scores.begin(), scores.end()), scores.end());
  for (size_t id = 0; id < n; ++id) {
    const Piece& p = m.pieces[id];
    if (p.type != kNormal) continue;
    int32_t rank =
        int32_t(std::lower_bound(scores.begin(), scores.end(), p.score, std::greater<>()) - scores.begin());
    deriver.add(p.text, {rank, int32_t(id)});
  }
  auto valid_id = [&](int id) -> std::optional<int32_t> {
    if (id >= 0 && size_t(id) < n) return int32_t(id);
    return std::nullopt;
  };
  spec.unk = valid_id(m.unk_id);
  spec.bos = valid_id(m.bos_id);
  spec.eos = valid_id(m.eos_id);
  spec.pad = valid_id(m.pad_id);
  spec.adds_bos = spec.bos.has_value();
  if (m.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      LT_CHECK(byte_ids[b] >= 0,
               "SentencePiece model {}: byte_fallback is on but piece <0x{:02X}> is missing", path, b);
    }
    model.set_byte_fallback(byte_ids);
  }
  model.set_unk(spec.unk, false);
  NormalizerStep normalize{.kind = NormalizerStep::Kind::kSentencePiece};
  normalize.remove_extra_whitespaces = m.remove_extra_whitespaces;
  normalize.add_dummy_prefix = m.add_dummy_prefix;
  normalize.escape_whitespaces = m.escape_whitespaces;
  spec.normalizers.push_back(normalize);
  spec.sentencepiece_decode = true;
  spec.strip_dummy_prefix = m.add_dummy_prefix;
  spec.unk_surface = m.unk_surface;
  return std::make_unique<PipelineTokenizer>(std::move(spec));
}

}  // namespace lt::data

namespace lt::data {

SentencePieceVocab read_sentencepiece_vocab(const std::string& path) {
  const ModelProto m = parse_model(read_tokenizer_file(path), path);
  SentencePieceVocab vocab;
  vocab.unk_id = m.unk_id;
  vocab.bos_id = m.bos_id;
  vocab.eos_id = m.eos_id;
  vocab.pad_id = m.pad_id;
  vocab.pieces.reserve(m.pieces.size());
  for (const Piece& p : m.pieces) vocab.pieces.push_back({p.text, p.score, p.type});
  return vocab;
}

}  // namespace lt::data

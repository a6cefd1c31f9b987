#include "cli/tokenize_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "data/tokenizer.h"

namespace lt::cli {
namespace {

struct TokenizeOptions {
  std::string tokenizer;
  std::string input = "-";
  bool add_special_tokens = false;
  bool decode = false;
};

// One input line to one output line; errors name the input and line.
std::string process_line(const data::Tokenizer& tok, const TokenizeOptions& opt, const std::string& line,
                         const std::string& where) {
  check_json_depth(line, where);
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    LT_FAIL("{}: not valid JSON: {}", where, json_error_detail(e));
  }
  if (!opt.decode) {
    LT_CHECK(value.is_string(), "{}: expected a JSON string, found {}", where, value.type_name());
    std::vector<int32_t> ids;
    try {
      ids = opt.add_special_tokens ? tok.encode_with_special(value.get_ref<const std::string&>())
                                   : tok.encode(value.get_ref<const std::string&>());
    } catch (const Error& e) {
      LT_FAIL("{}: {}", where, e.what());
    }
    return fmt::format("[{}]\n", fmt::join(ids, ","));
  }
  LT_CHECK(value.is_array(), "{}: expected a JSON array of token ids, found {}", where, value.type_name());
  std::vector<int32_t> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& v = value[i];
    LT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < tok.vocab_size(),
             "{}: element {} is {}, expected a token id in [0, {})", where, i, v.dump(), tok.vocab_size());
    ids.push_back(v.get<int32_t>());
  }
  // Ids that split a UTF-8 character decode to invalid UTF-8; JSON output shows those bytes as U+FFFD.
  return nlohmann::json(tok.decode(ids)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

void run_tokenize(const TokenizeOptions& opt) {
  std::unique_ptr<data::Tokenizer> tok = data::load_tokenizer(opt.tokenizer);
  std::ifstream file;
  std::istream* in = &std::cin;
  std::string name = opt.input == "-" ? std::string("<stdin>") : opt.input;
  if (opt.input != "-") {
    require_regular_file(opt.input);
    file.open(opt.input, std::ios::binary);
    LT_CHECK(file.good(), "tokenize: cannot open input '{}'", opt.input);
    in = &file;
  }
  std::string line, out;
  size_t line_no = 0;
  while (std::getline(*in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines carry no record
    out += process_line(*tok, opt, line, fmt::format("{}:{}", name, line_no));
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto opt = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "encode JSONL strings to JSON arrays of token ids (one per line), or decode with --decode");
  cmd->add_option("--tokenizer", opt->tokenizer,
                  "tokenizer.json, tokenizer.model, vocab.json (with merges.txt) or a model folder")
      ->required();
  cmd->add_option("--input", opt->input, "JSONL input file (default: stdin)");
  cmd->add_flag("--add_special_tokens", opt->add_special_tokens,
                "add the BOS/EOS the tokenizer's format defines");
  cmd->add_flag("--decode", opt->decode, "read arrays of ids and write the decoded JSON strings");
  cmd->callback([opt] { run_tokenize(*opt); });
}

}  // namespace lt::cli

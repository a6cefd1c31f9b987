#include "data/encode_segments.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace lt::data {

namespace {

// The special-token strings a chat template marks turns with.
std::vector<std::string> template_markers(TemplateKind kind) {
  if (kind == TemplateKind::llama3) return {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
  if (kind == TemplateKind::chatml) return {"<|im_start|>", "<|im_end|>"};
  return {};
}

}  // namespace

std::vector<std::string> markers_missing_from_vocabulary(TemplateKind kind, const Tokenizer& tokenizer) {
  std::vector<std::string> missing;
  for (const std::string& marker : template_markers(kind))
    if (!tokenizer.token_to_id(marker)) missing.push_back(marker);
  return missing;
}

EncodeOptions encode_options_for(TemplateKind kind, const Tokenizer& tokenizer, int64_t cutoff_len,
                                 bool train_on_inputs) {
  // A marker that is not a token is encoded as plain text (several tokens): the model never gets one
  // end-of-turn token to learn and to stop on. Allowed (a base model can learn such a format), but said.
  if (const std::vector<std::string> missing = markers_missing_from_vocabulary(kind, tokenizer);
      !missing.empty())
    fmt::print(
        stderr,
        "warning: prompt template '{}': {} not in the tokenizer's vocabulary, so encoded as plain text "
        "(several tokens each); the model's own template (prompt_template: auto) or a tokenizer with "
        "these tokens avoids it\n",
        template_name(kind), fmt::join(missing, ", "));
  LT_CHECK(cutoff_len >= 2, "cutoff_len is {}, expected at least 2 (one token to read, one to predict)",
           cutoff_len);
  TemplatePolicy policy = template_policy(kind);
  EncodeOptions options;
  options.cutoff_len = cutoff_len;
  options.train_on_inputs = train_on_inputs;
  options.add_bos = policy.force_bos || tokenizer.adds_bos();
  options.add_eos = policy.append_eos;
  options.spanning_token_is_target = policy.spanning_token_is_target;
  LT_CHECK(!options.add_bos || tokenizer.bos_id().has_value(),
           "prompt template '{}' starts with BOS but the tokenizer defines no BOS token",
           template_name(kind));
  LT_CHECK(!options.add_eos || tokenizer.eos_id().has_value(),
           "prompt template '{}' ends the target with EOS but the tokenizer defines no EOS token",
           template_name(kind));
  return options;
}

Example encode_segments(const Tokenizer& tokenizer, std::span<const Segment> segments,
                        const EncodeOptions& options, bool* truncated) {
  std::vector<int32_t> ids;     // (T)
  std::vector<uint8_t> prompt;  // (T) 1 where the token belongs to a prompt segment
  if (options.add_bos) {
    ids.push_back(*tokenizer.bos_id());
    prompt.push_back(1);
  }
  // Merge neighbours with identical flags first: no boundary to locate between them.
  std::vector<Segment> merged;
  for (const Segment& s : segments) {
    if (!merged.empty() && merged.back().is_prompt == s.is_prompt &&
        merged.back().allow_special == s.allow_special)
      merged.back().text += s.text;
    else
      merged.push_back(s);
  }
  for (size_t begin = 0; begin < merged.size();) {
    size_t end = begin + 1;
    while (end < merged.size() && merged[end].allow_special == merged[begin].allow_special) ++end;
    bool special = merged[begin].allow_special;
    std::string run_text;
    for (size_t k = begin; k < end; ++k) run_text += merged[k].text;
    std::vector<int32_t> run = tokenizer.encode(run_text, special);
    size_t done = 0;  // tokens of `run` already assigned to a segment
    std::string prefix;
    for (size_t k = begin; k < end; ++k) {
      size_t upto = run.size();
      if (k + 1 < end) {
        prefix += merged[k].text;
        std::vector<int32_t> p = tokenizer.encode(prefix, special);
        upto = p.size();
        if (options.spanning_token_is_target) {
          size_t same = size_t(std::mismatch(p.begin(), p.end(), run.begin(), run.end()).first - p.begin());
          // A straddling token: after the target's tokens when the target ends here, else before them.
          if (same < p.size()) upto = merged[k].is_prompt ? same : same + 1;
        }
        upto = std::clamp(upto, done, run.size());
      }
      ids.insert(ids.end(), run.begin() + done, run.begin() + upto);
      prompt.insert(prompt.end(), upto - done, merged[k].is_prompt ? 1 : 0);
      done = upto;
    }
    begin = end;
  }
  size_t cutoff = size_t(options.cutoff_len);
  if (truncated) *truncated = ids.size() > cutoff;
  if (ids.size() > cutoff) {
    ids.resize(cutoff);
    prompt.resize(cutoff);
  }
  if (options.add_eos) {
    int32_t eos = *tokenizer.eos_id();
    if (ids.size() < cutoff && (ids.empty() || ids.back() != eos)) {
      ids.push_back(eos);
      prompt.push_back(0);
    }
  }
  Example example;
  example.input_ids = ids;
  example.labels = std::move(ids);
  if (!options.train_on_inputs)
    for (size_t t = 0; t < prompt.size(); ++t)
      if (prompt[t]) example.labels[t] = kIgnoreIndex;
  return example;
}

}  // namespace lt::data

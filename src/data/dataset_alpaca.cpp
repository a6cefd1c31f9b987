#include "data/dataset_alpaca.h"

#include "data/dataset_chat.h"
#include "data/encode_segments.h"

namespace lt::data {

Dataset load_alpaca(const std::string& path, const Tokenizer& tokenizer, const DatasetOptions& options) {
  if (options.model_template)
    return load_with_model_template(path, tokenizer, options, [](const nlohmann::json& record) {
      require_object(record);
      return instruction_as_chat(string_field(record, "instruction"),
                                 string_field(record, "input", /*optional=*/true),
                                 string_field(record, "output"));
    });
  EncodeOptions encode =
      encode_options_for(options.prompt_template, tokenizer, options.cutoff_len, options.train_on_inputs);
  Dataset dataset;
  dataset.source = path;
  BadRecords bad(options.on_bad_record);
  for_each_json_record(path, bad, [&](const std::string&, const nlohmann::json& record) {
    require_object(record);
    std::string instruction = string_field(record, "instruction");
    std::string input = string_field(record, "input", /*optional=*/true);
    std::string output = string_field(record, "output");
    std::vector<Segment> segments = render_instruction(options.prompt_template, instruction, input, output);
    bool truncated = false;
    Example example = encode_segments(tokenizer, segments, encode, &truncated);
    add_record_example(dataset, std::move(example), truncated);
  });
  finish_dataset(dataset, bad);
  return dataset;
}

}  // namespace lt::data

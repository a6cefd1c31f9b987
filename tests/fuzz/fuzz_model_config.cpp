// config.json: the bounded reader, the typed parse with its range checks, and the saved form read back.
#include "core/json_read.h"
#include "fuzz_support.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lt::fuzz::write_input("config.json", data, size);
  lt::fuzz::refusals_are_fine([&] {
    const lt::model::ModelConfig cfg = lt::model::load_model_config(path);
    lt::model::describe_model_config(cfg);
    const lt::model::ModelConfig back =
        lt::model::parse_model_config(lt::model::model_config_json(cfg, "float32"), "saved config.json");
    if (lt::model::describe_model_config(back) != lt::model::describe_model_config(cfg)) __builtin_trap();
  });
  return 0;
}

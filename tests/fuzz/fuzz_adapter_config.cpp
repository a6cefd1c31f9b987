// adapter_config.json: parsing, then every pattern matched against the module names of a model.
#include "fuzz_support.h"
#include "io/peft_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lt::fuzz::write_input("adapter_config.json", data, size);
  lt::fuzz::refusals_are_fine([&] {
    const lt::io::LoraAdapterConfig c = lt::io::read_adapter_config(path);
    for (const char* name :
         {"model.layers.0.self_attn.q_proj", "model.layers.11.mlp.down_proj", "lm_head", ""}) {
      c.targets(name);
      c.rank_for(name);
      c.alpha_for(name);
    }
    lt::io::parse_adapter_config(lt::io::adapter_config_json(c), "written");
  });
  return 0;
}

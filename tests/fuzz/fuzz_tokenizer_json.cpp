// tokenizer.json: loading, then encode/decode of a fixed text (ids must stay inside the vocabulary).
#include "data/tokenizer.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lt::fuzz::write_input("tokenizer.json", data, size);
  lt::fuzz::refusals_are_fine([&] {
    auto tok = lt::data::load_tokenizer(path);
    for (const char* text : {"Hello world", " a\tb\n\xE2\x96\x81<s></s>", ""}) {
      std::vector<int32_t> ids = tok->encode_with_special(text);
      for (int32_t id : ids)
        if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
      tok->decode(ids);
    }
  });
  return 0;
}

// A SentencePiece .model (binary protobuf) or a tiktoken rank file: load_tokenizer picks by content.
#include "data/tokenizer.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lt::fuzz::write_input("tokenizer.model", data, size);
  lt::fuzz::refusals_are_fine([&] {
    auto tok = lt::data::load_tokenizer(path);
    std::vector<int32_t> ids = tok->encode_with_special("Hello world \xC3\xA9");
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
    tok->decode(ids);
  });
  return 0;
}

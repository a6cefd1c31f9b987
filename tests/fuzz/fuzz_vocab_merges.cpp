// GPT-2 style vocab.json + merges.txt: the input is split at its first NUL byte into the two files.
#include <cstring>

#include "data/tokenizer.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t vocab_size = nul ? size_t(nul - data) : size;
  lt::fuzz::write_input("vocab.json", data, vocab_size);
  lt::fuzz::write_input("merges.txt", nul ? nul + 1 : data + size, nul ? size - vocab_size - 1 : 0);
  lt::fuzz::refusals_are_fine([&] {
    auto tok = lt::data::load_tokenizer(lt::fuzz::scratch_dir());
    std::vector<int32_t> ids = tok->encode_with_special("Hello world");
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
    tok->decode(ids);
  });
  return 0;
}

// trainer_state.json and the other small JSON files (index, generation config) go through the one bounded
// reader, io::read_json_file; its refusals name the file. The field extraction of a trainer state lives in
// the train layer and is covered by tests/train.
#include "fuzz_support.h"
#include "io/json_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lt::fuzz::write_input("trainer_state.json", data, size);
  lt::fuzz::refusals_are_fine([&] {
    const nlohmann::json j = lt::io::read_json_file(path);
    (void)j.dump();
  });
  return 0;
}

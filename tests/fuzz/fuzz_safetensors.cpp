// The safetensors reader: header parsing and validation, then every small tensor read as f64.
#include <algorithm>
#include <vector>

#include "core/tensor.h"
#include "fuzz_support.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lt::fuzz::write_input("model.safetensors", data, size);
  lt::fuzz::refusals_are_fine([&] {
    auto reader = lt::io::CheckpointReader::open(path);
    for (const std::string& name : reader->names()) {
      const lt::io::SafetensorsEntry& e = reader->entry(name);
      int64_t n = 1;
      for (int64_t d : e.shape) n = d > 0 && n <= (int64_t(1) << 20) / d ? n * d : (int64_t(1) << 21);
      if (n > (int64_t(1) << 20)) continue;
      std::vector<double> values(size_t(std::max<int64_t>(n, 1)));
      lt::Tensor dst(values.data(), lt::DType::F64, {n});  // a flat view; a shape mismatch is refused
      if (e.shape.size() <= size_t(lt::Tensor::kMaxDims)) {
        dst.ndim = int(e.shape.size());
        for (size_t i = 0; i < e.shape.size(); ++i) dst.shape[i] = e.shape[i];
      }
      lt::fuzz::refusals_are_fine([&] { reader->read_into(name, dst); });
    }
  });
  return 0;
}

// leantune's 4-bit quantization (ops/quant4.h) against bitsandbytes (tools/make_bnb_quant_golden.py):
// quantize_4bit's packed bytes and absmax byte for byte, dequantize_4bit's values bit for bit in f32, bf16
// and f16, and the double quantization of the scales (8-bit codes, nested absmax, dequantized absmax).
// Cases: random weights whose blocks cross rows, a partial last block, an odd count, all-zero blocks,
// values exactly on the decision midpoints, and the tiny Llama's real weights in f32, bf16 and fp16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "ops/quant4.h"
#include "support/test_support.h"

namespace lt {
namespace {

class Golden {
 public:
  Golden() : file_(io::SafetensorsFile::open(test::source_path("tests/ops/golden/bnb_quant4.safetensors"))) {}

  const io::SafetensorsEntry& entry(const std::string& name) const {
    const io::SafetensorsEntry* e = file_->find(name);
    if (!e) throw std::runtime_error("golden tensor missing: " + name);
    return *e;
  }
  template <class T>
  std::vector<T> read(const std::string& name) const {
    const io::SafetensorsEntry& e = entry(name);
    std::vector<T> out(size_t(e.end - e.begin) / sizeof(T));
    std::memcpy(out.data(), e.data, out.size() * sizeof(T));
    return out;
  }
  nlohmann::json cases() const { return nlohmann::json::parse(file_->metadata().at("cases"))["cases"]; }

 private:
  std::unique_ptr<io::SafetensorsFile> file_;
};

DType dtype_named(const std::string& name) {
  return name == "bfloat16" ? DType::BF16 : name == "float16" ? DType::F16 : DType::F32;
}

// Index of the first differing element, or -1.
template <class T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return int64_t(std::min(a.size(), b.size()));
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return int64_t(i);
  return -1;
}

TEST(Quant4Golden, TablesAreBitsandbytes) {
  Golden g;
  const std::vector<float> map = g.read<float>("dynamic_map");
  EXPECT_EQ(first_difference(ops::signed_dynamic_map(), map), -1) << "create_dynamic_map(signed=True)";
  for (ops::Quant4Type t : {ops::Quant4Type::NF4, ops::Quant4Type::FP4}) {
    const std::array<float, 16> mine = ops::quant4_quant_map(t);
    EXPECT_EQ(first_difference(std::vector<float>(mine.begin(), mine.end()),
                               g.read<float>(std::string(ops::quant4_type_name(t)) + "_code")),
              -1)
        << "get_4bit_type(" << ops::quant4_type_name(t) << ")";
  }
}

TEST(Quant4Golden, QuantizeAndDequantizeAreBitsandbytesBytes) {
  Golden g;
  int checked = 0;
  for (const auto& c : g.cases()) {
    const std::string name = c["name"];
    const DType dtype = dtype_named(c["dtype"]);
    const io::SafetensorsEntry& input = g.entry(name + ".input");
    const int64_t n = input.numel();
    for (ops::Quant4Type t : {ops::Quant4Type::NF4, ops::Quant4Type::FP4}) {
      const std::string key = name + "." + std::string(ops::quant4_type_name(t));
      SCOPED_TRACE(key);
      std::vector<uint8_t> packed(size_t(ops::quant4_packed_bytes(n)));
      std::vector<float> absmax(size_t(ops::quant4_blocks(n)));
      ops::quantize_4bit_cpu(dtype, input.data, n, t, packed.data(), absmax.data());
      EXPECT_EQ(first_difference(packed, g.read<uint8_t>(key + ".packed")), -1) << "packed codes";
      EXPECT_EQ(first_difference(absmax, g.read<float>(key + ".absmax")), -1) << "absmax";

      const std::vector<uint8_t> gold_packed = g.read<uint8_t>(key + ".packed");
      const std::vector<float> gold_absmax = g.read<float>(key + ".absmax");
      for (DType out : {DType::F32, DType::BF16, DType::F16}) {
        const std::string out_name = out == DType::F32    ? "float32"
                                     : out == DType::BF16 ? "bfloat16"
                                                          : "float16";
        std::vector<uint8_t> mine(size_t(n) * dtype_size(out));
        ops::dequantize_4bit_cpu(gold_packed.data(), gold_absmax.data(), n, t, out, mine.data());
        const std::vector<uint8_t> gold = g.read<uint8_t>(key + ".deq_" + out_name);
        EXPECT_EQ(first_difference(mine, gold), -1) << "dequantized to " << out_name << " (byte index)";
      }

      // Double quantization of the golden absmax. torch's f32 mean sums in an order of its own (vector width,
      // pairwise blocks); leantune's is the f64 sum rounded once: within one ulp. Given the same offset, the
      // 8-bit codes, nested scales and dequantized scales are bitsandbytes' bits.
      const int64_t blocks = int64_t(gold_absmax.size());
      const float gold_offset = g.read<float>(key + ".dq_offset")[0];
      const float offset = ops::absmax_mean(gold_absmax.data(), blocks);
      EXPECT_LE(std::fabs(offset - gold_offset), std::fabs(std::nextafter(gold_offset, 1e30f) - gold_offset))
          << "mean of absmax";
      const std::vector<float> map = g.read<float>("dynamic_map");
      std::vector<uint8_t> q(static_cast<size_t>(blocks));
      std::vector<float> nested(size_t(ops::nested_blocks(blocks)));
      ops::quantize_absmax_cpu(gold_absmax.data(), blocks, gold_offset, map.data(), q.data(), nested.data());
      EXPECT_EQ(first_difference(q, g.read<uint8_t>(key + ".dq_qabsmax")), -1) << "8-bit absmax codes";
      EXPECT_EQ(first_difference(nested, g.read<float>(key + ".dq_nested_absmax")), -1) << "nested absmax";
      std::vector<float> back(static_cast<size_t>(blocks));
      ops::dequantize_absmax_cpu(g.read<uint8_t>(key + ".dq_qabsmax").data(),
                                 g.read<float>(key + ".dq_nested_absmax").data(), map.data(), gold_offset,
                                 blocks, back.data());
      EXPECT_EQ(first_difference(back, g.read<float>(key + ".dq_absmax")), -1) << "dequantized absmax";
      ++checked;
    }
  }
  EXPECT_GE(checked, 2 * 11) << "every golden case ran";
}

}  // namespace
}  // namespace lt

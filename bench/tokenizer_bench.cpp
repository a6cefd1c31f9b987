// Single-threaded encode throughput of one leantune tokenizer on one text file (bench/tokenizer_bench.py
// runs it next to tiktoken). Prints: "<MB/s> <ids> <seconds>" of the best of --runs runs.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "data/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tokenizer_bench TOKENIZER TEXT_FILE [RUNS]\n");
    return 2;
  }
  int runs = argc > 3 ? std::atoi(argv[3]) : 3;
  auto tok = lt::data::load_tokenizer(argv[1]);
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  double best = 1e30;
  size_t count = 0;
  for (int r = 0; r < runs; ++r) {
    auto start = std::chrono::steady_clock::now();
    std::vector<int32_t> ids = tok->encode(text);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, seconds);
    count = ids.size();
  }
  std::printf("%.3f %zu %.4f\n", double(text.size()) / 1e6 / best, count, best);
  return 0;
}

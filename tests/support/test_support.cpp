#include "support/test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/philox.h"

namespace lt::test {

std::string shared_path(const std::string& relative) {
  const char* env = std::getenv("LEANTUNE_SHARED");
  std::filesystem::path root = env ? std::filesystem::path(env) : std::filesystem::path(LT_SOURCE_DIR) / ".." / "shared";
  std::filesystem::path p = root / relative;
  if (std::filesystem::exists(p)) return p.string();
  if (std::getenv("CI")) {
    ADD_FAILURE() << "shared data missing: " << p << " (CI is set, so this test fails instead of skipping)";
  } else {
    std::string msg = "shared data missing: " + p.string();
    GTEST_MESSAGE_AT_(__FILE__, __LINE__, msg.c_str(), ::testing::TestPartResult::kSkip);
  }
  return "";
}

std::string source_path(const std::string& relative) { return std::string(LT_SOURCE_DIR) + "/" + relative; }

TempDir::TempDir() {
  std::string templ = (std::filesystem::temp_directory_path() / "leantune-test-XXXXXX").string();
  char* made = mkdtemp(templ.data());
  if (!made) throw std::runtime_error("mkdtemp failed");
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<double> random_values(size_t count, uint64_t seed, double lo, double hi) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = lo + (hi - lo) * philox_uniform_double(seed, 0x7e57, i);
  return v;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return a.size() == b.size() ? m : INFINITY;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double norm = 0;
  for (double x : b) norm = std::max(norm, std::abs(x));
  return max_abs_diff(a, b) / std::max(norm, 1e-300);
}

std::vector<double> finite_difference_gradient(std::vector<double>& x, const std::function<double()>& f, double h) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double saved = x[i];
    x[i] = saved + h;
    double fp = f();
    x[i] = saved - h;
    double fm = f();
    x[i] = saved;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

}  // namespace lt::test

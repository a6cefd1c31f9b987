// The process environment has one reader (core/process_env.h): no other file in src/ calls getenv (or its
// variants), so that every variable leantune reads is found in one place, and configuration keys stay what
// chooses behaviour.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/process_env.h"
#include "support/test_support.h"

namespace lt {
namespace {

namespace fs = std::filesystem;

TEST(ProcessEnv, GetenvIsCalledOnlyByTheOneReader) {
  const fs::path src = test::source_path("src");
  ASSERT_TRUE(fs::is_directory(src)) << src;
  const fs::path reader = fs::path("core") / "process_env.cpp";
  std::vector<std::string> offenders;
  size_t files = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(src)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
    ++files;
    if (fs::relative(e.path(), src) == reader) continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    for (const char* call : {"getenv", "secure_getenv", "environ["})
      if (text.str().find(call) != std::string::npos)
        offenders.push_back(fs::relative(e.path(), src).string() + " (" + call + ")");
  }
  EXPECT_GT(files, 100u) << "the walk found src/";
  EXPECT_TRUE(offenders.empty()) << "read the environment through core/process_env.h instead: "
                                 << ::testing::PrintToString(offenders);
}

TEST(ProcessEnv, ReadsSetUnsetAndEmptyVariables) {
  ASSERT_EQ(setenv("LT_TEST_PROCESS_ENV", "value", 1), 0);
  EXPECT_EQ(environment_variable("LT_TEST_PROCESS_ENV"), std::optional<std::string>("value"));
  ASSERT_EQ(setenv("LT_TEST_PROCESS_ENV", "", 1), 0);
  EXPECT_EQ(environment_variable("LT_TEST_PROCESS_ENV"), std::optional<std::string>(""));
  ASSERT_EQ(unsetenv("LT_TEST_PROCESS_ENV"), 0);
  EXPECT_EQ(environment_variable("LT_TEST_PROCESS_ENV"), std::nullopt);
}

}  // namespace
}  // namespace lt

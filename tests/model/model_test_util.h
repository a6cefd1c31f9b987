// Helpers shared by the model tests: fixture paths, the transformers goldens, and error-message checks.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/test_support.h"

namespace lt::test {

// tests/model/configs/<name>.json
inline std::string model_fixture(const std::string& name) {
  return source_path("tests/model/configs/" + name + ".json");
}

// What transformers made of each fixture (tools/model_config_goldens.py).
inline const nlohmann::json& model_goldens() {
  static const nlohmann::json goldens = [] {
    std::ifstream in(model_fixture("goldens"));
    return nlohmann::json::parse(in);
  }();
  return goldens;
}

// Runs `body`, expects an lt::Error whose message contains every one of `parts`.
inline void expect_error_mentions(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "expected an lt::Error mentioning " << ::testing::PrintToString(parts);
  } catch (const Error& e) {
    std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "message: " << message << "\nmissing: " << part;
  }
}

}  // namespace lt::test

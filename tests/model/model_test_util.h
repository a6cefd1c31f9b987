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

}  // namespace lt::test

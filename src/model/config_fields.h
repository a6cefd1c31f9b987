// FieldReader: typed reads of one config.json object for parse_model_config and the architecture files
// (model/arch/); every error names the file, the field and the value found.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"

namespace lt::model {

using nlohmann::json;

// Reads typed fields of one JSON object; every error names the file, the field and the value found.
class FieldReader {
 public:
  FieldReader(const json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // Present and not null.
  bool has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }
  // Present with the value null (which some fields distinguish from absent).
  bool is_null(const char* key) const { return object_.contains(key) && object_.at(key).is_null(); }
  const json& at(const char* key) const { return object_.at(key); }
  std::string name(const char* key) const { return prefix_ + key; }

  int64_t integer(const char* key) const {
    LT_CHECK(object_.contains(key), "{}: required field '{}' is missing", source_, name(key));
    const json& v = object_.at(key);
    LT_CHECK(v.is_number_integer(), "{}: field '{}' is {}, expected an integer", source_, name(key),
             v.dump());
    if (v.is_number_unsigned()) {
      LT_CHECK(v.get<uint64_t>() <= uint64_t(INT64_MAX), "{}: field '{}' is {}, which is too large", source_,
               name(key), v.dump());
    }
    return v.get<int64_t>();
  }
  int64_t positive(const char* key) const {
    int64_t value = integer(key);
    LT_CHECK(value > 0, "{}: field '{}' is {}, expected a positive integer", source_, name(key), value);
    return value;
  }
  int64_t positive_or(const char* key, int64_t fallback) const { return has(key) ? positive(key) : fallback; }
  // A size field: positive and at most `max`, so that products of sizes cannot overflow.
  int64_t size(const char* key, int64_t max) const {
    int64_t value = positive(key);
    LT_CHECK(value <= max, "{}: field '{}' is {}, expected at most {}", source_, name(key), value, max);
    return value;
  }
  int64_t size_or(const char* key, int64_t max, int64_t fallback) const {
    return has(key) ? size(key, max) : fallback;
  }
  std::optional<int64_t> optional_integer(const char* key) const {
    if (!has(key)) return std::nullopt;
    return integer(key);
  }

  double number(const char* key) const {
    LT_CHECK(object_.contains(key), "{}: required field '{}' is missing", source_, name(key));
    const json& v = object_.at(key);
    LT_CHECK(v.is_number(), "{}: field '{}' is {}, expected a number", source_, name(key), v.dump());
    double value = v.get<double>();
    LT_CHECK(std::isfinite(value), "{}: field '{}' is {}, expected a finite number", source_, name(key),
             v.dump());
    return value;
  }
  double number_or(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }

  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = object_.at(key);
    LT_CHECK(v.is_boolean(), "{}: field '{}' is {}, expected true or false", source_, name(key), v.dump());
    return v.get<bool>();
  }

  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = object_.at(key);
    LT_CHECK(v.is_string(), "{}: field '{}' is {}, expected a string", source_, name(key), v.dump());
    return v.get<std::string>();
  }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

}  // namespace lt::model

// One field of a parsed JSON document by its dotted path, of the JSON type the caller needs: a missing
// field or another type is refused naming the file and the field (never nlohmann's own exception text).
#pragma once

#include <fmt/core.h>

#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "core/error.h"

namespace lt::io {

// `keys`: the path from the root ({"data", "index"} is data.index); `document` says what the file should
// be ("a leantune trainer state") in the message for a missing field. T: an arithmetic type (integers are
// range-checked) or std::string.
template <class T>
T json_field(const nlohmann::json& j, std::initializer_list<const char*> keys, const std::string& path,
             const char* document) {
  const nlohmann::json* v = &j;
  std::string name;
  for (const char* k : keys) {
    name += name.empty() ? k : fmt::format(".{}", k);
    LT_CHECK(v->is_object() && v->contains(k), "{}: field '{}' is missing, expected {}", path, name,
             document);
    v = &(*v)[k];
  }
  if constexpr (std::is_same_v<T, std::string>) {
    LT_CHECK(v->is_string(), "{}: field '{}' is {}, expected a string", path, name, v->dump());
  } else if constexpr (std::is_floating_point_v<T>) {
    LT_CHECK(v->is_number(), "{}: field '{}' is {}, expected a number", path, name, v->dump());
  } else {
    LT_CHECK(v->is_number_integer(), "{}: field '{}' is {}, expected an integer", path, name, v->dump());
    if constexpr (std::is_unsigned_v<T>) {
      LT_CHECK(v->is_number_unsigned(), "{}: field '{}' is {}, expected a non-negative integer", path, name,
               v->dump());
    } else {  // an unsigned value above the signed range would wrap
      LT_CHECK(!v->is_number_unsigned() || v->get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max()),
               "{}: field '{}' is {}, expected at most {}", path, name, v->dump(),
               std::numeric_limits<T>::max());
    }
  }
  return v->get<T>();
}

}  // namespace lt::io

// leantune's version: `leantune --version`, model cards, GGUF metadata.
#pragma once

namespace lt {

inline constexpr const char* kLeantuneVersion = "0.1.0";

}  // namespace lt

// core/enum_names.h: the configuration boundary's enum <-> name tables and their one error message.
#include <gtest/gtest.h>

#include <span>

#include "core/enum_names.h"
#include "core/error.h"

namespace lt {
namespace {

enum class Color : uint8_t { Red, Green, Blue };
constexpr EnumName<Color> kColors[] = {
    {Color::Red, "red"}, {Color::Green, "green"}, {Color::Blue, "blue"}, {Color::Red, "crimson"}};
const std::span<const EnumName<Color>> colors(kColors);

std::string error_of(std::string_view text) {
  try {
    parse_enum(colors, text, "cfg.yaml line 2: 'color'");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EnumNames, ParsesEveryNameAndAliases) {
  EXPECT_EQ(parse_enum(colors, "red", "x"), Color::Red);
  EXPECT_EQ(parse_enum(colors, "green", "x"), Color::Green);
  EXPECT_EQ(parse_enum(colors, "blue", "x"), Color::Blue);
  EXPECT_EQ(parse_enum(colors, "crimson", "x"), Color::Red);
}

TEST(EnumNames, TheFirstNameIsTheCanonicalOne) {
  EXPECT_STREQ(enum_name(colors, Color::Red), "red");
  EXPECT_STREQ(enum_name(colors, Color::Blue), "blue");
  EXPECT_EQ(enum_names(colors), (std::vector<std::string>{"red", "green", "blue", "crimson"}));
}

TEST(EnumNames, AnUnknownNameIsRefusedWithTheChoicesAndTheClosest) {
  EXPECT_EQ(error_of("gren"),
            "cfg.yaml line 2: 'color' is 'gren', expected one of red, green, blue, crimson (did you mean "
            "'green'?)");
  // Nothing close: no suggestion. Case matters (names are exact).
  EXPECT_EQ(error_of("purple"),
            "cfg.yaml line 2: 'color' is 'purple', expected one of red, green, blue, crimson");
  EXPECT_NE(error_of("RED").find("is 'RED', expected one of"), std::string::npos);
  EXPECT_EQ(error_of(""), "cfg.yaml line 2: 'color' is '', expected one of red, green, blue, crimson");
}

TEST(EnumNames, EditDistanceAndClosestName) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(closest_name("learning_rat", {"learning_rate", "lora_r"}), "learning_rate");
  EXPECT_EQ(closest_name("zzzzzzzz", {"learning_rate", "lora_r"}), "");
}

}  // namespace
}  // namespace lt

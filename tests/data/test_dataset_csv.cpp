// CSV and TSV dataset files (data/csv_records.h, over libcsv) against Python's csv.DictReader
// (tools/make_csv_golden.py): quoting, doubled quotes, newlines and delimiters inside quoted fields, CRLF,
// surrounding spaces kept, blank lines skipped, a byte-order mark, no final newline. Bad rows, bad quoting
// and bad headers get one message naming the file and row.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "byte_tokenizer.h"
#include "data/csv_records.h"
#include "data/dataset_load.h"
#include "data_test_util.h"
#include "support/test_support.h"

namespace lt::data {
namespace {

std::vector<nlohmann::json> read_all(const std::string& path, OnBadRecord policy = OnBadRecord::error,
                                     std::vector<std::string>* where = nullptr) {
  std::vector<nlohmann::json> out;
  BadRecords bad(policy);
  for_each_json_record(path, bad, [&](const std::string& w, const nlohmann::json& record) {
    out.push_back(record);
    if (where) where->push_back(w);
  });
  return out;
}

TEST(DatasetCsv, RecordsEqualPythonsCsvModule) {
  std::ifstream in(lt::test::source_path("tests/data/golden/csv_golden.json"));
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_EQ(golden["files"].size(), 2u);
  lt::test::TempDir dir;
  for (const auto& f : golden["files"]) {
    SCOPED_TRACE(f["name"].get<std::string>());
    const std::string path = dir.file(f["name"]);
    test::write_file(path, f["text"]);
    const std::vector<nlohmann::json> records = read_all(path);
    ASSERT_EQ(records.size(), f["records"].size());
    for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i], f["records"][i]);
  }
}

TEST(DatasetCsv, LoadsAsAlpacaWithRowLocations) {
  lt::test::TempDir dir;
  const std::string path = dir.file("data.csv");
  test::write_file(path, "instruction,input,output\nSay hi,,hi\n\"two\nlines\",x,y\n");
  EXPECT_EQ(detect_data_format(path), DataFormat::alpaca);
  test::ByteTokenizer tok;
  DatasetOptions options;
  options.cutoff_len = 1000;
  const Dataset d = load_dataset(path, tok, options);
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(tok.decode(d.examples[0].input_ids), "<s>" + alpaca_prompt("Say hi", "") + "hi</s>");
  // Rows as a spreadsheet counts them (the header is row 1), also past a quoted newline.
  test::write_file(path, "instruction,output\n\"a\nb\",ok\nonly one field\n");
  std::vector<std::string> where;
  EXPECT_EQ(read_all(path, OnBadRecord::skip, &where).size(), 1u);
  EXPECT_EQ(where, std::vector<std::string>{path + " row 2"});
  EXPECT_EQ(test::error_message([&] { read_all(path); }),
            path +
                " row 3: 1 field(s), but the header (row 1) names 2 (set on_bad_record: skip to drop such "
                "records)");
}

TEST(DatasetCsv, RefusesBadQuotingAndHeadersNamingTheRow) {
  lt::test::TempDir dir;
  const std::string path = dir.file("bad.csv");
  test::write_file(path, "instruction,output\nok,fine\nx\"y,z\n");
  std::string message = test::error_message([&] { read_all(path, OnBadRecord::skip); });
  EXPECT_NE(message.find("dataset " + path + ": row 3: "), std::string::npos) << message;
  test::write_file(path, "instruction,output\n\"never closed,z\n");
  message = test::error_message([&] { read_all(path, OnBadRecord::skip); });
  EXPECT_NE(message.find("row 2"), std::string::npos) << message;
  test::write_file(path, "a,a\n1,2\n");
  EXPECT_EQ(test::error_message([&] { read_all(path); }),
            "dataset " + path + ": header (row 1) names 'a' twice");
  test::write_file(path, "a,,c\n1,2,3\n");
  EXPECT_EQ(test::error_message([&] { read_all(path); }),
            "dataset " + path + ": header (row 1) column 2 has no name, expected a field name");
  test::write_file(path, "");
  EXPECT_EQ(test::error_message([&] { read_all(path); }),
            "dataset " + path + ": no header row, expected the field names on row 1");
}

}  // namespace
}  // namespace lt::data

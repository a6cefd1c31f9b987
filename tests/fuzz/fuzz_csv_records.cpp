// CSV dataset files (data/csv_records.h, over libcsv): the first byte chooses comma or tab separation;
// every record is visited under on_bad_record: skip, so rows with the wrong field count are counted, and
// malformed quoting ends the file with an lt::Error.
#include "data/csv_records.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string path =
      lt::fuzz::write_input(data[0] & 1 ? "records.tsv" : "records.csv", data + 1, size - 1);
  lt::fuzz::refusals_are_fine([&] {
    lt::data::BadRecords bad(lt::data::OnBadRecord::skip);
    lt::data::for_each_csv_record(path, bad, [](const std::string&, const nlohmann::json& record) {
      lt::data::require_object(record);
      lt::data::string_field(record, "instruction");
      lt::data::string_field(record, "input", true);
    });
  });
  return 0;
}

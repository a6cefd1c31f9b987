#!/usr/bin/env python3
"""Golden records of CSV/TSV dataset files, read by Python's csv module (csv.DictReader, as datasets' CSV
loader reads with pandas: header row, RFC 4180 quoting, blank lines skipped), for leantune's CSV reader over
libcsv (tests/data/test_dataset_csv.cpp).

Usage: python3 tools/make_csv_golden.py  (writes tests/data/golden/csv_golden.json)
"""
import csv
import io
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FILES = {
    "alpaca.csv": ("\ufeffinstruction,input,output\r\n"
                   "Say hi,,hi\r\n"
                   "\"Add, then \"\"quote\"\"\",\"1\n2\",3\r\n"
                   "  spaced  , inner space ,\"\"\r\n"
                   "\r\n"
                   "ünïcödé ✓,日本語,\"multi\r\nline\"\r\n"
                   "last,no newline,end"),
    "prompt_completion.tsv": ("prompt\tcompletion\n"
                              "What is 2+2?\t4\n"
                              "\"tab\tinside\"\t\"quoted \"\"q\"\"\"\n"
                              "\n"
                              "a,b\tc;d\n"),
}


def main():
    golden = {"files": []}
    for name, text in FILES.items():
        delimiter = "\t" if name.endswith(".tsv") else ","
        body = text[1:] if text.startswith("\ufeff") else text
        rows = [r for r in csv.DictReader(io.StringIO(body, newline=""), delimiter=delimiter)]
        golden["files"].append({"name": name, "text": text, "records": rows})
    with open(os.path.join(ROOT, "tests/data/golden/csv_golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

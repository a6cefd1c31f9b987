# Sourced by the bench scripts: rows_file FILE ROWS LEN VOCAB writes ROWS pretokenized records of LEN random
# token ids in [3, VOCAB) (seed 0, so every run and every binary trains on the same rows).
rows_file() {
  python3 - "$@" <<'PY'
import json, random, sys
path, rows, length, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
random.seed(0)
with open(path, "w") as f:
    for _ in range(rows):
        f.write(json.dumps({"input_ids": [random.randrange(3, vocab) for _ in range(length)]}) + "\n")
PY
}

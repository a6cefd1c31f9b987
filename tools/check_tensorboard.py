#!/usr/bin/env python3
"""Checks that TensorBoard itself reads leantune's event files.

Runs the TensorBoard.WriterFileReadsBack test of test_io with LT_TENSORBOARD_DEMO_DIR set, so the file lands in
a directory we keep, then loads it with tensorboard's EventAccumulator and compares the scalars.
Needs `pip install tensorboard` and a built test_io (cmake --build build/cpu --target test_io).
Usage: python3 tools/check_tensorboard.py [build/cpu/bin/test_io]
"""
import os
import subprocess
import sys
import tempfile

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/cpu/bin/test_io"
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, LT_TENSORBOARD_DEMO_DIR=d)
        subprocess.run([binary, "--gtest_filter=TensorBoard.WriterFileReadsBack"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        files = [f for f in os.listdir(d) if "tfevents" in f]
        assert len(files) == 2, files  # the test writes two files: one with scalars, one empty
        acc = EventAccumulator(d)
        acc.Reload()
        tags = sorted(acc.Tags()["scalars"])
        assert tags == ["train/loss", "train/lr"], tags
        loss = [(e.step, e.value, e.wall_time) for e in acc.Scalars("train/loss")]
        lr = [(e.step, e.value) for e in acc.Scalars("train/lr")]
        want_loss = [(s, 3.0 / s, 1000.0 + s) for s in range(1, 6)]
        want_lr = [(s, 1e-4 * s) for s in range(1, 6)]
        for (s, v, t), (ws, wv, wt) in zip(loss, want_loss):
            assert s == ws and abs(v - wv) <= 1e-6 * abs(wv) and t == wt, (s, v, t)
        for (s, v), (ws, wv) in zip(lr, want_lr):
            assert s == ws and abs(v - wv) <= 1e-6 * abs(wv), (s, v)
        assert len(loss) == 5 and len(lr) == 5
        print(f"ok: EventAccumulator read {len(loss)} loss and {len(lr)} lr scalars from {files}")


if __name__ == "__main__":
    main()

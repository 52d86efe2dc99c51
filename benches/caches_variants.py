#!/usr/bin/env python3
"""What each cache in the core buys: builds the `caches` bench once per variant of
the library (all caches; recent.rs off; reparse off; the pidfd table off) by
editing the source in place for the build and restoring it after, then runs the
variants' binaries in alternation (ROUNDS rounds, order rotating) and prints each
workload's median with its ratio against the variant with all caches.

    python3 benches/caches_variants.py [ROUNDS]     # default 7; about 2 minutes a round

The edits are exact text replacements: if the code they name changes, the script
stops with the text it could not find (update the VARIANTS table)."""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict

VARIANTS = {
    "all caches": {},
    "no recent.rs": {
        "src/lease/file/recent.rs": [
            ("pub fn lookup(path: &Path, bytes: &[u8]) -> Option<Found> {\n",
             "pub fn lookup(path: &Path, bytes: &[u8]) -> Option<Found> {\n    if true { return None; }\n"),
            ("pub fn remember(path: &Path, bytes: Vec<u8>, file: &RegistryFile, hermes_layout: bool) {\n",
             "pub fn remember(path: &Path, bytes: Vec<u8>, file: &RegistryFile, hermes_layout: bool) {\n    if true { return; }\n"),
        ]
    },
    "no reparse.rs": {"src/lease/file/recent.rs": [("        if !hit.hermes_layout {", "        if true || !hit.hermes_layout {")]},
    "no pidfds.rs": {
        "src/lease/owners/pidfds.rs": [
            ("pub fn running_start_ticks(pid: u64) -> Option<u64> {\n",
             "pub fn running_start_ticks(pid: u64) -> Option<u64> {\n    if true { return None; }\n"),
            ("pub fn remember(pid: u64, pidfd: OwnedFd, start_ticks: u64) {\n",
             "pub fn remember(pid: u64, pidfd: OwnedFd, start_ticks: u64) {\n    if true { return; }\n"),
        ]
    },
}


def build(root, out_dir):
    bins = {}
    for name, files in VARIANTS.items():
        saved = {}
        try:
            for path, edits in files.items():
                text = open(path).read()
                saved[path] = text
                for old, new in edits:
                    if old not in text:
                        sys.exit(f"{name}: {path} no longer contains {old!r}")
                    text = text.replace(old, new, 1)
                open(path, "w").write(text)
            run = subprocess.run(["cargo", "bench", "--no-run", "--bench", "caches"], capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"{name}: build failed\n{run.stderr[-3000:]}")
            exe = next(l for l in run.stderr.splitlines() if "Executable" in l).split("(")[1].rstrip(")")
        finally:
            for path, text in saved.items():
                open(path, "w").write(text)
        dest = os.path.join(out_dir, str(len(bins)))
        os.makedirs(dest)
        shutil.copy(exe, os.path.join(dest, "caches"))
        shutil.copy(os.path.join(root, "target/release/leasectl"), os.path.join(dest, "leasectl"))
        bins[name] = dest
        print(f"built: {name}", file=sys.stderr)
    return bins


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    with tempfile.TemporaryDirectory(prefix="leasectl-cache-variants-") as out_dir:
        bins = build(root, out_dir)
        names = list(bins)
        times = defaultdict(lambda: defaultdict(list))
        for r in range(rounds):
            for name in names[r % len(names):] + names[: r % len(names)]:
                env = dict(os.environ, CACHES_LEASECTL=os.path.join(bins[name], "leasectl"))
                out = subprocess.run([os.path.join(bins[name], "caches"), "--bench"], env=env,
                                     capture_output=True, text=True, check=True).stdout
                for line in out.splitlines():
                    workload, ms = line.split()
                    times[workload][name].append(float(ms))
        print(f"{'workload':<18}" + "".join(f"{n:>18}" for n in names))
        for workload, by in times.items():
            base = statistics.median(by[names[0]])
            cells = [f"{base:.3f} ms"] + [
                f"{statistics.median(by[n]):.3f} {statistics.median(by[n]) / base:.2f}x" for n in names[1:]
            ]
            print(f"{workload:<18}" + "".join(f"{c:>18}" for c in cells))


main()

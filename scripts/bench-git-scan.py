#!/usr/bin/env python3
"""What cordon's search for git metadata costs a run: `cordon run -- true` in a tree of
100 000 files holding 50 nested repositories (20 of them in node_modules) against the same in
an empty directory, in turn, round after round. Prints the median and the 10th/90th
percentiles of each, in milliseconds, and the ratio of the medians.

    scripts/bench-git-scan.py [--cordon PATH] [--rounds N] [--files N] [--repos N] [--keep]

The tree is made under /var/tmp (not /tmp: the sandbox has a private /tmp) and removed at the
end unless --keep. CORDON_GIT_SCAN_LIMIT in the environment is passed on.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def build_tree(root, files, repos):
    """`files` empty files in directories of 20, and `repos` repositories made by git, some in
    node_modules, some under vendor/, each with a file of its own and one commit."""
    per_dir = 20
    for d in range(files // per_dir):
        # Three levels, as source trees are.
        path = os.path.join(root, "src", f"a{d % 10}", f"b{d // 10 % 25}", f"c{d}")
        os.makedirs(path, exist_ok=True)
        for f in range(per_dir):
            open(os.path.join(path, f"f{f}.txt"), "w").close()
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    for r in range(repos):
        parent = "node_modules" if r < repos * 2 // 5 else "vendor"
        path = os.path.join(root, parent, f"dep{r}")
        os.makedirs(path, exist_ok=True)
        open(os.path.join(path, "index.js"), "w").close()
        subprocess.run(["git", "init", "-q", path], check=True, env=env)
    subprocess.run(["git", "init", "-q", root], check=True, env=env)


def count_entries(root):
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cordon", default="target/dist/cordon")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--repos", type=int, default=50)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    if a.rounds < 5:
        p.error("--rounds must be at least 5")
    cordon = os.path.abspath(a.cordon)
    base = tempfile.mkdtemp(prefix="cordon-git-scan-", dir="/var/tmp")
    tree = os.path.join(base, "tree")
    empty = os.path.join(base, "empty")
    os.makedirs(empty)
    try:
        build_tree(tree, a.files, a.repos)
        print(f"tree: {tree}: {count_entries(tree)} entries, {a.repos} nested repositories")
        places = [("empty directory", empty), ("100k-file tree", tree)]
        times = [[] for _ in places]
        quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(3):  # warm-up: the page cache holds the tree for every round alike
            for _, cwd in places:
                subprocess.run([cordon, "run", "--", "true"], cwd=cwd, check=True, **quiet)
        for _ in range(a.rounds):
            for i, (_, cwd) in enumerate(places):
                start = time.perf_counter()
                subprocess.run([cordon, "run", "--", "true"], cwd=cwd, check=True, **quiet)
                times[i].append((time.perf_counter() - start) * 1000)
        medians = []
        for (name, _), t in zip(places, times):
            t.sort()
            medians.append(statistics.median(t))
            print(f"median {medians[-1]:.2f} ms  p10 {t[len(t) // 10]:.2f}  "
                  f"p90 {t[len(t) * 9 // 10]:.2f}  min {t[0]:.2f}  max {t[-1]:.2f}  {name}")
        print(f"ratio of medians: {medians[1] / medians[0]:.2f}")
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

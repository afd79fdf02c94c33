"""A project's working tree for the benchmarks that run cordon in one (bench-exec.py and
bench-hook.py --tree)."""

import math
import os
import subprocess


def make_tree(cwd, dirs):
    """A project's working tree in `cwd`: a git repository with DIRS directories two deep under
    src/, eight small files in each (cordon's own checkout with its build had 3 200 directories
    and 27 000 entries). A run's search for git metadata looks at every one of them."""
    subprocess.run(["git", "init", "-q", cwd], check=True)
    width = max(1, math.ceil(dirs ** 0.5))
    made = 0
    for i in range(width):
        for j in range(width):
            if made == dirs:
                return
            d = os.path.join(cwd, "src", f"m{i}", f"p{j}")
            os.makedirs(d)
            for k in range(8):
                with open(os.path.join(d, f"f{k}.txt"), "w") as f:
                    f.write("x\n")
            made += 1

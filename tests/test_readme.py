"""Every fenced ``python`` block of README.md runs as written and prints what
it shows. The blocks run one after another in one child interpreter, each in
a fresh namespace (so a block that leans on a name from an earlier one
fails), sharing only imports and NLTK's corpus caches, which keeps the whole
file to well under a minute."""
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARK = "\x00README-BLOCK"

# The child: runs each block in a fresh ``__main__`` namespace, between markers;
# a block that raises prints its traceback and the child goes on with the next.
DRIVER = f"""
import json, sys, traceback
blocks = json.load(sys.stdin)
for name, code in blocks:
    print({MARK!r}, name, flush=True)
    try:
        exec(compile(code, name, "exec"), {{"__name__": "__main__"}})
        print({MARK!r}, "ok", flush=True)
    except BaseException:
        traceback.print_exc(file=sys.stdout)
        print({MARK!r}, "failed", flush=True)
"""


def readme_blocks():
    """(name, code) of every python block: the name gives its first line in README.md."""
    text = README.read_text(encoding="utf8")
    return [(f"README.md:{text.count(chr(10), 0, m.start(1)) + 1}", m.group(1)) for m in FENCE.finditer(text)]


BLOCKS = readme_blocks()


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 7


@pytest.mark.parametrize("name,code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_block_prints_what_it_shows(name, code):
    """A bare expression prints nothing when the block runs as a script:
    every top-level expression must be a call (print, fit, ...), and the
    block must print."""
    tree = ast.parse(code, name)
    bare = [node.lineno for node in tree.body if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call)]
    assert not bare, f"{name}: bare expression(s) at block line(s) {bare} print nothing; print them"
    calls = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "print" in calls, f"{name} prints nothing"


@pytest.fixture(scope="module")
def block_runs(tmp_path_factory):
    """{name: (status, output)} of running every block as written."""
    env = dict(os.environ)
    if env.get("NLTK_DATA"):  # the child runs elsewhere: a relative data root would not be found
        env["NLTK_DATA"] = str(Path(env["NLTK_DATA"]).resolve())
    out = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(BLOCKS), capture_output=True,
                         text=True, cwd=tmp_path_factory.mktemp("readme"), env=env, timeout=600)
    runs, name, lines = {}, None, []
    for line in out.stdout.splitlines():
        if line.startswith(MARK):
            word = line[len(MARK):].strip()
            if word in ("ok", "failed"):
                runs[name] = (word, "\n".join(lines))
            else:
                name, lines = word, []
        else:
            lines.append(line)
    if out.returncode:
        pytest.fail(f"the README blocks' interpreter exited with {out.returncode}:\n{out.stderr[-3000:]}")
    return runs


@pytest.mark.parametrize("name,code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_block_runs_as_written(block_runs, name, code):
    assert name in block_runs, f"{name} did not run"
    status, output = block_runs[name]
    assert status == "ok", f"{name} failed:\n{output[-3000:]}"
    assert output.strip(), f"{name} printed nothing"

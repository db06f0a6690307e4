"""The README's Python quick start runs as written: its ```python block is
extracted and run as a script, in a fresh directory, with the interpreter
the package was installed into."""

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_python_quick_start_runs_as_written(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1, "one Python quick start in README.md"
    script = tmp_path / "quickstart.py"
    script.write_text(blocks[0])
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "b'{\"age\": 30}'",
        "b'gone'",
        "b'alice' b'{\"age\": 30}'",
        "b'{\"age\":'",
    ]
    assert (tmp_path / "data.ib").is_file()

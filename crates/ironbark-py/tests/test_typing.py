"""The type stubs match the extension module (mypy's stubtest compares
every name and signature with the runtime objects) and type-check a
typical program under mypy --strict."""

import subprocess
import sys
import textwrap


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True)


def test_the_stubs_match_the_module(tmp_path):
    out = run("mypy.stubtest", "ironbark._ironbark", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_typical_program_type_checks(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(
        textwrap.dedent(
            """
            from typing import Optional, Union
            import ironbark

            def main(path: str) -> int:
                with ironbark.open(path, durability="none") as db:
                    with db.begin(write=True) as txn:
                        txn.put(b"k", b"v", tree="t")
                        txn.put_many(((b"k%d" % i, b"v") for i in range(3)), tree="t")
                        deleted: bool = txn.delete(b"gone")
                    with db.begin(buffers=True) as txn:
                        value: Optional[Union[bytes, memoryview]] = txn.get(b"k", tree="t")
                        total = sum(len(k) + len(v) for k, v in txn.prefix(b"k", tree="t"))
                    return total + txn.count() + int(deleted) + (0 if value is None else 1)
            """
        )
    )
    out = run("mypy", "--strict", "--no-incremental", str(program), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    # And the checker does check: a wrong type is reported.
    program.write_text("import ironbark\nironbark.open(42)\n")
    out = run("mypy", "--strict", "--no-incremental", str(program), cwd=tmp_path)
    assert out.returncode == 1 and "arg-type" in out.stdout, out.stdout

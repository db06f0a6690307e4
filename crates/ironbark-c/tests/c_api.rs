//! Tests of the C API from C: the header declares exactly what the library
//! exports (with the same constants), the C test program (tests/c) passes
//! under AddressSanitizer and UndefinedBehaviorSanitizer against the static
//! library and also runs against the shared one, and the README's C quick
//! start compiles and runs as written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// This crate's directory.
fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory cargo put this crate's libraries in: the test executable
/// is `<target>/<profile>/deps/c_api-<hash>`, the libraries are in
/// `<target>/<profile>`.
fn lib_dir() -> PathBuf {
    build_libraries();
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf();
    for lib in ["libironbark_c.a", "libironbark_c.so"] {
        assert!(
            dir.join(lib).is_file(),
            "{} is missing after cargo build",
            dir.join(lib).display()
        );
    }
    dir
}

/// Builds the static and shared libraries (`cargo test` builds only the
/// rlib the Rust tests link), in the profile of this test run, once per
/// test process.
fn build_libraries() {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--lib", "-p", "ironbark-c"]);
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build");
        assert!(status.success(), "{cmd:?} failed");
    });
}

/// The libraries a Rust static library needs from the system.
const SYSTEM_LIBS: &[&str] = &["-lpthread", "-ldl", "-lm"];

/// Compiles `sources` with gcc into `out`, with `extra` flags; panics with
/// gcc's output on failure.
fn gcc(sources: &[&Path], out: &Path, extra: &[&str]) {
    let mut cmd = Command::new("gcc");
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(crate_dir().join("include"))
        .args(sources)
        .args(extra)
        .arg("-o")
        .arg(out);
    let output = cmd
        .output()
        .expect("gcc must be installed to test the C API");
    assert!(
        output.status.success(),
        "gcc failed: {cmd:?}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `exe` with `args` in `cwd`; returns stdout, panicking with both
/// streams unless it exits 0.
fn run(exe: &Path, args: &[&Path], cwd: &Path, env: &[(&str, &str)]) -> String {
    let output = Command::new(exe)
        .args(args)
        .current_dir(cwd)
        .envs(env.iter().copied())
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        exe.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The names of the functions the Rust source exports.
fn exported_functions() -> Vec<String> {
    let src = std::fs::read_to_string(crate_dir().join("src/lib.rs")).unwrap();
    let mut names: Vec<String> = src
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix("pub unsafe extern \"C\" fn ")
                .or_else(|| l.strip_prefix("pub extern \"C\" fn "))?;
            Some(rest.split('(').next()?.trim().to_string())
        })
        .collect();
    names.sort();
    names
}

/// The names of the functions the header declares: comments and
/// preprocessor lines removed, each `;`-terminated statement with a `(`
/// that is not a typedef declares the identifier just before its `(`.
fn declared_functions() -> Vec<String> {
    let header = std::fs::read_to_string(crate_dir().join("include/ironbark.h")).unwrap();
    let mut code = String::new();
    let mut rest = header.as_str();
    while let Some(open) = rest.find("/*") {
        code.push_str(&rest[..open]);
        let close = rest[open..].find("*/").expect("comment closed");
        rest = &rest[open + close + 2..];
    }
    code.push_str(rest);
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let mut names: Vec<String> = code
        .split(';')
        .map(str::trim)
        .filter(|s| s.contains('(') && !s.starts_with("typedef") && !s.starts_with('}'))
        .map(|s| {
            let before = s.split('(').next().unwrap().trim_end();
            let name = before
                .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap();
            name.to_string()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn the_header_declares_every_exported_function_and_nothing_else() {
    let exported = exported_functions();
    let declared = declared_functions();
    assert!(exported.len() >= 20, "{exported:?}");
    assert_eq!(
        exported, declared,
        "src/lib.rs exports vs include/ironbark.h"
    );
}

/// `NAME -> value` of the integer constants in the header (`#define`) or
/// the Rust source (`pub const`).
fn constants(text: &str, rust: bool) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let (name, value) = if rust {
            let Some(rest) = line.strip_prefix("pub const IRONBARK_") else {
                continue;
            };
            let (name, rhs) = rest.split_once(':').unwrap();
            (name, rhs.split('=').nth(1).unwrap().trim_end_matches(';'))
        } else {
            let Some(rest) = line.strip_prefix("#define IRONBARK_") else {
                continue;
            };
            let mut parts = rest.split_whitespace();
            let name = parts.next().unwrap();
            match parts.next() {
                Some(v) => (name, v),
                None => continue, // the include guard
            }
        };
        let v = value.trim().trim_matches(|c| c == '(' || c == ')');
        let v = v.trim_end_matches('u');
        let parsed = v
            .parse::<i64>()
            .unwrap_or_else(|_| panic!("IRONBARK_{name} = {value:?}"));
        out.insert(name.to_string(), parsed);
    }
    out
}

#[test]
fn the_header_constants_match_the_library() {
    let header = std::fs::read_to_string(crate_dir().join("include/ironbark.h")).unwrap();
    let src = std::fs::read_to_string(crate_dir().join("src/lib.rs")).unwrap();
    let mut from_header = constants(&header, false);
    let from_rust = constants(&src, true);
    // The header's one extra: the flag value 0 of a plain write txn.
    assert_eq!(from_header.remove("TXN_WRITE"), Some(0));
    assert!(from_rust.len() >= 30, "{from_rust:?}");
    assert_eq!(from_header, from_rust);
}

#[test]
fn the_c_test_program_passes_under_sanitizers() {
    let lib = lib_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("api_test");
    let mut flags = vec![
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    ];
    let archive = lib.join("libironbark_c.a");
    flags.push(archive.to_str().unwrap());
    flags.extend_from_slice(SYSTEM_LIBS);
    gcc(&[&crate_dir().join("tests/c/api_test.c")], &exe, &flags);
    let data = tempfile::tempdir().unwrap();
    let out = run(
        &exe,
        &[data.path()],
        dir.path(),
        &[
            ("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1"),
            ("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1"),
        ],
    );
    assert!(out.contains(" checks passed, 0 failed"), "{out}");
    let passed: u32 = out.split_whitespace().next().unwrap().parse().unwrap();
    assert!(passed > 200, "{out}");
}

#[test]
fn the_c_test_program_passes_against_the_shared_library() {
    let lib = lib_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("api_test_shared");
    let rpath = format!("-Wl,-rpath,{}", lib.display());
    let libdir = format!("-L{}", lib.display());
    gcc(
        &[&crate_dir().join("tests/c/api_test.c")],
        &exe,
        &[&libdir, "-lironbark_c", &rpath],
    );
    let data = tempfile::tempdir().unwrap();
    let out = run(&exe, &[data.path()], dir.path(), &[]);
    assert!(out.contains(" checks passed, 0 failed"), "{out}");
}

/// The first fenced block of `lang` in the workspace README.
fn readme_block(lang: &str) -> String {
    let readme = std::fs::read_to_string(crate_dir().join("../../README.md")).unwrap();
    let fence = format!("```{lang}\n");
    let start = readme.find(&fence).expect("README has the block") + fence.len();
    let len = readme[start..].find("```").expect("the block is closed");
    readme[start..start + len].to_string()
}

#[test]
fn the_readme_c_quick_start_runs_as_written() {
    let lib = lib_dir();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("quickstart.c");
    std::fs::write(&source, readme_block("c")).unwrap();
    let exe = dir.path().join("quickstart");
    let archive = lib.join("libironbark_c.a");
    let mut flags = vec!["-fsanitize=address,undefined", archive.to_str().unwrap()];
    flags.extend_from_slice(SYSTEM_LIBS);
    gcc(&[&source], &exe, &flags);
    let out = run(&exe, &[], dir.path(), &[]);
    assert!(out.contains("alice = {\"age\": 30}"), "{out}");
    assert!(dir.path().join("data.ib").is_file());
}

#[test]
fn the_header_compiles_as_strict_c99_and_as_cpp() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("use.c");
    std::fs::write(
        &source,
        "#include \"ironbark.h\"\nint main(void) { return ironbark_strerror(IRONBARK_OK) == 0; }\n",
    )
    .unwrap();
    let include = crate_dir().join("include");
    for (compiler, std) in [("gcc", "-std=c99"), ("g++", "-std=c++11")] {
        let mut cmd = Command::new(compiler);
        cmd.args([
            std,
            "-Wall",
            "-Wextra",
            "-pedantic",
            "-Werror",
            "-fsyntax-only",
        ]);
        if compiler == "g++" {
            cmd.args(["-x", "c++"]);
        }
        let output = cmd.arg("-I").arg(&include).arg(&source).output().unwrap();
        assert!(
            output.status.success(),
            "{cmd:?}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

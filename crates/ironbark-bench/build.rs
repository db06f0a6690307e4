//! Compiles the C shims of the Debian-packaged peers that are enabled.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=shims/ibshim.h");
    #[cfg(any(feature = "leveldb", feature = "wiredtiger", feature = "bdb"))]
    {
        let shims: &[(&str, &str, &str)] = &[
            #[cfg(feature = "leveldb")]
            ("leveldb", "shims/leveldb.c", "leveldb"),
            #[cfg(feature = "wiredtiger")]
            ("wiredtiger", "shims/wiredtiger.c", "wiredtiger"),
            #[cfg(feature = "bdb")]
            ("bdb", "shims/bdb.c", "db-5.3"),
        ];
        for (name, file, lib) in shims {
            println!("cargo:rerun-if-changed={file}");
            cc::Build::new()
                .file(file)
                .include("shims")
                .opt_level(2)
                .warnings(true)
                .compile(&format!("ibshim_{name}"));
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
}

// Compiles abi_probe.c against the header of this tree (or PICOMQ_SDK_INCLUDE_DIR, an installed
// SDK's include folder): the ABI's own plane rules and the layout facts of the layout test.
use std::path::PathBuf;

fn main() {
    let include = std::env::var_os("PICOMQ_SDK_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include"));
    println!("cargo:rerun-if-changed=abi_probe.c");
    println!("cargo:rerun-if-changed={}", include.join("picomq/sink_abi.h").display());
    println!(
        "cargo:rerun-if-changed={}",
        include.join("picomq/arrow_c_data.h").display()
    );
    println!("cargo:rerun-if-env-changed=PICOMQ_SDK_INCLUDE_DIR");
    cc::Build::new()
        .file("abi_probe.c")
        .include(&include)
        .warnings(true)
        .compile("picomq_rs_abi_probe");
}

//! Generates `for_each_hostile_guest!`, invoking a macro once per crate in
//! `guests/hostile/`, so that a hostile guest without a test fails the build.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when it runs: a build script built for one checkout may run for another.
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR")?).join("../guests/hostile");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut guests: Vec<String> = std::fs::read_dir(&dir)?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .filter_map(|e| e.file_name().to_str().map(|n| n.replace('-', "_")))
        .collect();
    guests.sort();
    let mut body = String::new();
    for guest in &guests {
        writeln!(body, "        $m!({guest}, \"hostile_{guest}.wasm\");")?;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("hostile_guests.rs");
    std::fs::write(
        out,
        format!(
            "/// Invokes `$m!(module_name, \"file.wasm\")` for every hostile guest.\n\
             macro_rules! for_each_hostile_guest {{\n    ($m:ident) => {{\n{body}    }};\n}}\n"
        ),
    )?;
    Ok(())
}

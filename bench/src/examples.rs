//! The example programs (`examples/*.vm` with their `.expected` output), loaded once for
//! every benchmark that runs them.

use cpjit_vm::Program;
use std::path::Path;

/// One example program.
pub struct Example {
    pub name: String,
    pub program: Program,
    pub expected: String,
}

/// Every `<dir>/*.vm`, sorted by name, parsed, with its `.expected` output.
pub fn load(dir: &Path) -> Result<Vec<Example>, String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".vm")
                .map(String::from)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let read = |ext: &str| {
                let path = dir.join(format!("{name}.{ext}"));
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
            };
            let program =
                cpjit_vm::parse(&read("vm")?).map_err(|e| format!("vm/examples/{name}.vm: {e}"))?;
            Ok(Example {
                expected: read("expected")?,
                program,
                name,
            })
        })
        .collect()
}

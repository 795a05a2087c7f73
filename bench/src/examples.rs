//! The example programs (`vm/examples/*.vm` with their `.expected` output), loaded once for
//! every benchmark that runs them; and the same programs at their real sizes
//! (`vm/examples/real-sizes.json`, [`load_real`]), where PyPy runs each for at least half a
//! second, with the output Python prints at that size (`vm/examples/real/<name>.expected`).

use cpjit_vm::Program;
use std::collections::BTreeMap;
use std::path::Path;

/// One example program.
pub struct Example {
    pub name: String,
    pub program: Program,
    pub expected: String,
    /// The program's text in the VM's language and in Python (what child processes run).
    pub vm_source: String,
    pub py_source: String,
}

/// The names of every `<dir>/*.vm`, sorted.
pub fn names(dir: &Path) -> Result<Vec<String>, String> {
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
    Ok(names)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every `<dir>/*.vm`, sorted by name, parsed, with its `.expected` output.
pub fn load(dir: &Path) -> Result<Vec<Example>, String> {
    names(dir)?
        .into_iter()
        .map(|name| {
            let file = |ext: &str| read(&dir.join(format!("{name}.{ext}")));
            let vm_source = file("vm")?;
            let program =
                cpjit_vm::parse(&vm_source).map_err(|e| format!("vm/examples/{name}.vm: {e}"))?;
            Ok(Example {
                expected: file("expected")?,
                program,
                py_source: file("py")?,
                vm_source,
                name,
            })
        })
        .collect()
}

/// One example's entry in `real-sizes.json`: per language, (text, replacement) pairs.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RealSize {
    vm: Vec<(String, String)>,
    py: Vec<(String, String)>,
}

/// The examples `<dir>/real-sizes.json` lists, at their real sizes: each pair's text
/// replaced by its replacement wherever it occurs (it must occur), expected output from
/// `<dir>/real/<name>.expected`.
pub fn load_real(dir: &Path) -> Result<Vec<Example>, String> {
    let sizes_file = dir.join("real-sizes.json");
    let sizes: BTreeMap<String, RealSize> = serde_json::from_str(&read(&sizes_file)?)
        .map_err(|e| format!("{}: {e}", sizes_file.display()))?;
    let mut examples = load(dir)?;
    if let Some(unknown) = sizes
        .keys()
        .find(|n| !examples.iter().any(|e| &e.name == *n))
    {
        return Err(format!(
            "{}: `{unknown}` is no example (no {unknown}.vm beside it)",
            sizes_file.display()
        ));
    }
    examples.retain(|e| sizes.contains_key(&e.name));
    for ex in &mut examples {
        let size = &sizes[&ex.name];
        let at = |lang: &str| format!("{}: {}.{lang}", sizes_file.display(), ex.name);
        ex.vm_source = resize(&ex.vm_source, &size.vm, &at("vm"))?;
        ex.py_source = resize(&ex.py_source, &size.py, &at("py"))?;
        ex.program = cpjit_vm::parse(&ex.vm_source)
            .map_err(|e| format!("{} at its real size: {e}", at("vm")))?;
        ex.expected = read(&dir.join(format!("real/{}.expected", ex.name)))?;
    }
    Ok(examples)
}

/// `source` with every pair's text replaced; `at` names the file in errors.
fn resize(source: &str, pairs: &[(String, String)], at: &str) -> Result<String, String> {
    let mut out = source.to_string();
    for (from, to) in pairs {
        if !out.contains(from.as_str()) {
            return Err(format!(
                "{at}: `{from}` does not occur in the program; write the text the size \
                 replaces exactly as the program has it"
            ));
        }
        out = out.replace(from.as_str(), to);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_but_overflow_has_a_real_size_that_parses() {
        let dir = crate::root().join("vm/examples");
        let real: Vec<String> = load_real(&dir)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        let mut all = names(&dir).unwrap();
        // overflow.vm shows an error at a fixed place: it has no size to grow.
        all.retain(|n| n != "overflow");
        assert_eq!(real, all);
    }

    #[test]
    fn a_size_whose_text_is_not_in_the_program_is_an_error_naming_it() {
        let pairs = [("N = 7".to_string(), "N = 8".to_string())];
        let err = resize("N = 6\n", &pairs, "x.py").unwrap_err();
        assert!(err.contains("x.py: `N = 7` does not occur"), "{err}");
        assert_eq!(
            resize("N = 7 # N = 7\n", &pairs, "x.py").unwrap(),
            "N = 8 # N = 8\n"
        );
    }
}

//! Units that miss the cache are compiled in groups, one `clang -cc1` process per group
//! (`cc1`): a unit with a compile error inside a group is reported with its own file and
//! line (the group is compiled unit by unit), and the dependency list recorded for each
//! unit of a group covers every header of the group, so changing a header that only one
//! unit includes rebuilds that unit. (That a group gives the stencils of units compiled
//! alone, on every target, is a unit test of `pipeline`.)

use crate::common;

use common::*;
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver;
use cpjit_toolchain::scale_set::ScaleSet;
use std::path::Path;

fn small(ops: usize) -> ScaleSet {
    ScaleSet {
        ops,
        header_lines: 200,
        batch_size: None,
    }
}

#[test]
fn a_compile_error_in_a_group_names_the_units_own_file_and_line() {
    let set = tempfile::tempdir().unwrap();
    small(6).write(set.path()).unwrap();
    let unit = set.path().join("ops/op_0002.c");
    let line = common::break_continuation(&unit);
    let triple = first_target();
    let out = tempfile::tempdir().unwrap();
    // One thread: 7 misses in groups of 4, so op_0002 shares its group with op_0000,
    // op_0001 and op_0003.
    let mut opts = options(
        set.path().to_path_buf(),
        &[&triple],
        out.path(),
        Cache::disabled(),
    );
    opts.common.jobs = 1;
    let err = driver::build_stencils(&opts).unwrap_err().0;
    assert!(
        err.contains(&format!("ops/op_0002.c:{line}:")) && err.contains("error"),
        "{err}"
    );
    for other in ["op_0000.c", "op_0001.c", "op_0003.c"] {
        assert!(!err.contains(other), "only the broken unit: {err}");
    }
    assert!(
        !err.contains("ops_op_0002_c-"),
        "no generated group input in the error: {err}"
    );
}

/// The stencils of `json` (a build's JSON dump, one target) by name, as JSON text.
fn stencils(json: &Path, triple: &str) -> std::collections::BTreeMap<String, String> {
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    value[triple]["stencils"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s.to_string()))
        .collect()
}

/// The dependency-list entries of `cache` that name a file called `name`.
fn dependency_lists_naming(cache: &Path, name: &str) -> usize {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("dep3-")
        })
        .filter(|p| {
            String::from_utf8_lossy(&std::fs::read(p).unwrap()).contains(&format!("/{name}\n"))
        })
        .count()
}

#[test]
fn a_header_only_one_unit_of_a_group_includes_is_a_dependency_of_the_group() {
    let set = tempfile::tempdir().unwrap();
    small(2).write(set.path()).unwrap();
    // op_0001 alone includes only_one.h; op_0000 is in its group (one thread: 3 misses
    // in groups of 2, in name order).
    let unit = set.path().join("ops/op_0001.c");
    let text = std::fs::read_to_string(&unit).unwrap();
    let set_call = text
        .lines()
        .find(|l| l.contains("_set(o, 1);"))
        .unwrap()
        .to_string();
    std::fs::write(
        &unit,
        text.replace(
            "#include \"scale.h\"",
            "#include \"scale.h\"\n#include \"only_one.h\"",
        )
        .replace(&set_call, &set_call.replace("1);", "ONLY_ONE);")),
    )
    .unwrap();
    let header = set.path().join("include/only_one.h");
    std::fs::write(&header, "#define ONLY_ONE 41\n").unwrap();
    let triple = first_target();
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("set.json");
    let mut opts = options(
        set.path().to_path_buf(),
        &[&triple],
        &out.path().join("crates"),
        Cache::new(cache.path().to_path_buf()),
    );
    opts.common.jobs = 1;
    opts.json = Some(json.clone());
    driver::build_stencils(&opts).unwrap();
    let before = stencils(&json, &triple);
    assert_eq!(
        dependency_lists_naming(cache.path(), "only_one.h"),
        2,
        "op_0000 and op_0001, compiled in one group, both list it"
    );
    assert_eq!(dependency_lists_naming(cache.path(), "scale.h"), 3);
    let bitcode_entries = || common::cache_entries(cache.path(), "bc2-");
    assert_eq!(bitcode_entries(), 3);

    std::fs::write(&header, "#define ONLY_ONE 977\n").unwrap();
    opts.force = true;
    driver::build_stencils(&opts).unwrap();
    assert_eq!(
        bitcode_entries(),
        5,
        "the group of op_0000 and op_0001 compiled again, the shim from the cache"
    );
    let after = stencils(&json, &triple);
    let changed: Vec<&String> = before
        .keys()
        .filter(|name| before[*name] != after[*name])
        .collect();
    assert_eq!(changed, ["op_0001"], "op_0001 rebuilt with the new header");
}

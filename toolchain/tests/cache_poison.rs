//! A clang that exits 0 with garbage must not poison the cache for the real clang that
//! runs afterwards (issue 15, item 2). The builds run the `cpjit` binary with `CPJIT_CLANG`
//! in its own environment: set in this process, every test running beside it would use the
//! fake clang too.

use std::path::Path;

use crate::common;

/// Builds the `per_unit` set with the `cpjit` binary (`clang`: `CPJIT_CLANG`, if given):
/// success, and stderr.
fn build(cache: &Path, out: &Path, clang: Option<&Path>) -> (bool, String) {
    let mut command = common::cpjit_build(&common::set("per_unit"), out, cache);
    command.env_remove("CPJIT_CLANG");
    if let Some(clang) = clang {
        command.env("CPJIT_CLANG", clang);
    }
    let result = command.output().unwrap();
    (
        result.status.success(),
        String::from_utf8_lossy(&result.stderr).into_owned(),
    )
}

#[test]
fn garbage_from_a_clang_that_exits_0_is_never_cached() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("clang-garbage");
    // The real clang for everything; bitcode generation (which writes the dependency file)
    // then "succeeds" with junk instead of its output: a unit compiled alone writes junk to
    // stdout, a `clang -cc1` group (whose command the driver's `-###` names as this script)
    // junk into every bitcode file.
    std::fs::write(
        &fake,
        r#"#!/bin/sh
if [ "$1" = -cc1 ]; then
  clang-19 "$@" || exit 1
  for f in *.bc; do printf 'BC\300\336garbage' > "$f"; done
  exit 0
fi
for a in "$@"; do
  if [ "$a" = '-###' ]; then
    clang-19 "$@" 2>&1 | sed "s|^ \"[^\"]*\" \"-cc1\"| \"$0\" \"-cc1\"|" >&2
    exit 0
  fi
  if [ "$a" = -emit-llvm ]; then
    clang-19 "$@" >/dev/null || exit 1
    printf 'BC\300\336garbage'
    exit 0
  fi
done
exec clang-19 "$@"
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cache = dir.path().join("cache");
    let out = dir.path().join("out");

    let (built, err) = build(&cache, &out, Some(&fake));
    assert!(!built, "garbage bitcode is an error");
    assert!(
        err.contains("cannot parse the bitcode clang produced"),
        "{err}"
    );
    let stored: Vec<String> = std::fs::read_dir(&cache)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        stored
            .iter()
            .all(|n| !n.starts_with("bc2-") && !n.starts_with("dep3-")),
        "nothing from the bad compiler was stored: {stored:?}"
    );

    let (built, err) = build(&cache, &out, None);
    assert!(built, "the real clang builds the set: {err}");
    let stored = std::fs::read_dir(&cache).unwrap().count();
    assert!(
        stored >= 4,
        "the good results are cached ({stored} entries)"
    );
}

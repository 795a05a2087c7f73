//! Unit tests of the generated crate writer.

use super::*;

#[test]
fn the_format_line_names_the_models_current_format() {
    let mut o = String::new();
    format_line(&mut o);
    let item = format!(
        "cpjit_model::format::regenerate_with_cpjit_build_stencils::FORMAT_{};",
        cpjit_model::format::VERSION
    );
    assert!(o.contains(&item), "{o}");
    assert!(
        o.contains("regenerate it with `cpjit build-stencils`"),
        "{o}"
    );
}

#[test]
fn thousands_separators() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(3456), "3,456");
    assert_eq!(thousands(1234567), "1,234,567");
}

#[test]
fn relative_paths() {
    assert_eq!(
        relative_path(Path::new("/w/stencils/x"), Path::new("/w/model")),
        "../../model"
    );
    assert_eq!(
        relative_path(Path::new("/w"), Path::new("/w/model")),
        "model"
    );
}

#[test]
fn identifiers() {
    assert_eq!(ident("op_add").unwrap(), "op_add");
    assert_eq!(ident("match").unwrap(), "r#match");
    assert!(ident("self").is_err());
    assert!(ident("a-b").is_err());
}

#[test]
fn atomic_write_replaces_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("src/lib.rs");
    write_atomic(&path, b"one").unwrap();
    write_atomic(&path, b"two").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"two");
    assert_eq!(
        std::fs::read_dir(dir.path().join("src")).unwrap().count(),
        1
    );
}

#[test]
fn stale_temporary_files_of_dead_or_old_runs_are_removed_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    // A pid above the kernel's maximum (2^22) is never running.
    let dead = dir.path().join(".lib.rs.4194305.tmp");
    let live = dir
        .path()
        .join(format!(".lib.rs.{}.tmp", std::process::id()));
    let old_live = dir
        .path()
        .join(format!(".Cargo.toml.{}.tmp", std::process::id()));
    let others = [
        ".notes.4194305.tmp",
        ".lib.rs.12a.tmp",
        "lib.rs",
        ".lib.rs.tmp",
    ];
    for path in [&dead, &live, &old_live] {
        std::fs::write(path, b"torn").unwrap();
    }
    for name in others {
        std::fs::write(dir.path().join(name), b"keep").unwrap();
    }
    let two_hours_ago = std::time::SystemTime::now() - 2 * STALE_AFTER;
    std::fs::File::options()
        .write(true)
        .open(&old_live)
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();
    assert_eq!(remove_stale_temporaries(dir.path()), [old_live, dead]);
    assert!(live.exists(), "a running process's fresh file stays");
    for name in others {
        assert!(dir.path().join(name).exists(), "{name} is not ours");
    }
    assert!(remove_stale_temporaries(&dir.path().join("missing")).is_empty());
}

#[test]
fn sidecar_json_has_sorted_keys_and_a_trailing_newline() {
    let sidecar = Sidecar {
        counts: Counts {
            code_bytes: 7468,
            cold_bytes: 300,
            continuing: 95,
            data_bytes: 176,
            elided_jumps: 90,
            holes: 158,
            stencils: 105,
        },
        files: [("src/lib.rs", "sha256:bb"), ("Cargo.toml", "sha256:aa")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .into_iter()
            .collect(),
        format: 1,
        inputs_digest: "sha256:cc".into(),
        template_set: "default".into(),
        triple: "some-target".into(),
    };
    let text = sidecar.to_json().unwrap();
    assert_eq!(
        text,
        "{\n  \"counts\": {\n    \"code_bytes\": 7468,\n    \"cold_bytes\": 300,\n    \"continuing\": 95,\n    \"data_bytes\": 176,\n    \"elided_jumps\": 90,\n    \"holes\": 158,\n    \"stencils\": 105\n  },\n  \"files\": {\n    \"Cargo.toml\": \"sha256:aa\",\n    \"src/lib.rs\": \"sha256:bb\"\n  },\n  \"format\": 1,\n  \"inputs_digest\": \"sha256:cc\",\n  \"template_set\": \"default\",\n  \"triple\": \"some-target\"\n}\n"
    );
    let back: Sidecar = serde_json::from_str(&text).unwrap();
    assert_eq!(back, sidecar);
}

#[test]
fn header_digest_is_read_back() {
    assert_eq!(
        header_digest("//! Generated ...\n//! Inputs digest: sha256:abc\n"),
        Some("abc")
    );
    assert_eq!(header_digest("// other\n"), None);
}

/// The sidecar's fall-through figure counts continuing stencils only: an entry shim whose
/// jump into the first instance was elided (riscv64 counted "217 of 216") is neither
/// continuing nor falling through.
#[test]
fn the_shims_elided_jump_is_not_a_fall_through() {
    use cpjit_model::{Arch, Hole, HoleKind, HoleValue, ObjectFormat, Section};
    let stencil = |name: &str, elided: bool, continues: bool| StencilBuf {
        code_align: 4,
        holes: continues
            .then_some(Hole {
                section: Section::Code,
                offset: 4,
                kind: HoleKind::Aarch64Branch26,
                value: HoleValue::Continue,
                addend: 0,
            })
            .into_iter()
            .collect(),
        elided_continue: elided,
        ..StencilBuf::plain(name, vec![0; 8])
    };
    let set = BuiltSet {
        target: crate::target::test_target(Arch::Aarch64, ObjectFormat::Elf),
        set_name: "default".into(),
        package: "p".into(),
        stencils: vec![
            stencil("entry", true, false),
            stencil("op_a", true, false),
            stencil("op_b", false, true),
            stencil("op_c", false, false),
        ],
        templates: vec!["t.c".into(); 4],
        symbols: vec![],
        zero_fill: vec![],
        shim: Some(0),
        digest: "d".into(),
        seconds: 0.0,
        families: vec![],
    };
    let counts = Sidecar::describe(&set, &[]).counts;
    assert_eq!((counts.elided_jumps, counts.continuing), (1, 2));
}

#[test]
fn bytes_are_one_byte_string_of_escapes_sixteen_a_line() {
    assert_eq!(byte_string(&[0x90, 0x0a], "  "), r#"b"\x90\x0a""#);
    let bytes: Vec<u8> = (0..18).collect();
    let expected = "b\"\\\n  \\x00\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08\\x09\\x0a\\x0b\\x0c\\x0d\\x0e\\x0f\\\n  \\x10\\x11\"";
    assert_eq!(byte_string(&bytes, "  "), expected);
    let mut o = String::new();
    bytes_field(&mut o, "init_data", &[]);
    assert_eq!(o, "        init_data: &[],\n");
}

//! The build cache as a trust boundary (issue 42): whoever can write the cache directory
//! must not choose the machine code that ships. A forged entry with a recomputed checksum
//! is a miss, `--check` reads no entry, and a directory others can write is refused.

use cpjit_model::{Arch, ObjectFormat};
use cpjit_toolchain::cache::Cache;
use cpjit_toolchain::driver::{self, BuildOptions};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

use crate::common;

/// The x86-64 ELF target: its objects' shifts are found by their encoding.
fn x86_elf() -> String {
    common::target(Arch::X86_64, ObjectFormat::Elf)
}

/// Every test keeps its key in its own temporary directory, not in the user's home (one
/// process per test under nextest, so the variable is this test's).
fn private_key(dir: &Path) {
    std::env::set_var("CPJIT_CACHE_KEY", dir.join("keys/cache-key"));
}

/// A forced build of the `family` set (a hand-written op and a family: every kind of entry)
/// for `triple` into `out`, through the cache in `cache`.
fn options(triple: &str, cache: &Path, out: &Path) -> BuildOptions {
    let mut opts = common::options(
        common::set("family"),
        &[triple],
        out,
        Cache::new(cache.to_path_buf()),
    );
    opts.force = true;
    opts
}

fn lib(out: &Path, triple: &str) -> String {
    std::fs::read_to_string(out.join(triple).join("src/lib.rs")).unwrap()
}

/// `content` with the immediate of its first `shl $imm8, %r64` (REX.W C1 /4 ib) plus one,
/// as the review rewrote `shr $0x30` into `shr $0x31`; `None` if it has no such shift.
fn rewrite_shift(content: &[u8]) -> Option<Vec<u8>> {
    let at = content.windows(4).position(|w| {
        matches!(w[0], 0x48 | 0x49 | 0x4c | 0x4d) && w[1] == 0xc1 && w[2] & 0xf8 == 0xe0
    })?;
    let mut forged = content.to_vec();
    forged[at + 3] += 1;
    Some(forged)
}

/// The obj- entries of `cache`: (path, kind-less key).
fn object_entries(cache: &Path) -> Vec<(PathBuf, String)> {
    let mut all: Vec<(PathBuf, String)> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            Some((e.path(), name.strip_prefix("obj-")?.to_string()))
        })
        .collect();
    all.sort();
    all
}

/// The unkeyed checksum the cache used to trust (issue 42): anyone can recompute it.
fn plain_checksum(content: &[u8]) -> [u8; 32] {
    let version = concat!("cpjit-toolchain ", env!("CARGO_PKG_VERSION"));
    let mut h = Sha256::new();
    h.update((version.len() as u64).to_le_bytes());
    h.update(version.as_bytes());
    h.update(content);
    h.finalize().into()
}

#[test]
fn a_cache_entry_forged_with_a_recomputed_checksum_is_rejected() {
    let triple = x86_elf();
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    // The binary, as a developer runs it: its notices are on stderr.
    let run = |out: &str| {
        let out = tmp.path().join(out);
        let result = std::process::Command::new(env!("CARGO_BIN_EXE_cpjit"))
            .args([
                "build-stencils",
                "--force",
                "--target",
                &triple,
                "--templates",
            ])
            .arg(common::set("family"))
            .arg("--targets-dir")
            .arg(common::workspace().join("targets"))
            .arg("--model-path")
            .arg(common::workspace().join("model"))
            .arg("--out")
            .arg(&out)
            .env("CPJIT_STENCIL_CACHE", &cache)
            .env("CPJIT_CACHE_KEY", tmp.path().join("keys/cache-key"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr).into_owned();
        assert!(result.status.success(), "{stderr}");
        (lib(&out, &triple), stderr)
    };
    let (reference, _) = run("reference");

    // The review's forgery: an instruction rewritten, the checksum recomputed; then the
    // same in the unkeyed format 1 layout (`cpjitc1\n`, checksum, content).
    for (round, magic) in [None, Some(b"cpjitc1\n")].into_iter().enumerate() {
        let mut forged = Vec::new();
        for (path, _) in object_entries(&cache) {
            let good = std::fs::read(&path).unwrap();
            let Some(content) = rewrite_shift(&good[40..]) else {
                continue;
            };
            let mut bytes = magic.map_or(good[..8].to_vec(), |m| m.to_vec());
            bytes.extend_from_slice(&plain_checksum(&content));
            bytes.extend_from_slice(&content);
            std::fs::write(&path, bytes).unwrap();
            forged.push((path, good));
        }
        assert!(
            !forged.is_empty(),
            "no cached object has a shift to rewrite"
        );

        let (rebuilt, stderr) = run(&format!("round{round}"));
        assert!(
            rebuilt == reference,
            "round {round}: the forged machine code was shipped:\n{stderr}"
        );
        let notices: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("notice: cache entry "))
            .collect();
        for (path, good) in &forged {
            let notice = format!("notice: cache entry {} is invalid (", path.display());
            let line = notices.iter().find(|l| l.starts_with(&notice));
            match (magic, line) {
                (None, Some(line)) => assert!(line.contains("HMAC"), "{line}"),
                (None, None) => panic!("no notice for {}:\n{stderr}", path.display()),
                // An old cache holds many unkeyed entries: only the first is named.
                (Some(_), _) => assert!(
                    notices.len() == 1
                        && notices[0].contains("unkeyed")
                        && notices[0].contains("further ones are replaced without a notice"),
                    "{stderr}"
                ),
            }
            assert_eq!(
                &std::fs::read(path).unwrap(),
                good,
                "{} is replaced by the entry a clean build makes",
                path.display()
            );
        }
    }
}

#[test]
fn check_reads_no_cache_entry() {
    let triple = x86_elf();
    let tmp = tempfile::tempdir().unwrap();
    private_key(tmp.path());
    let cache = tmp.path().join("cache");
    let committed = tmp.path().join("committed");
    driver::build_stencils(&options(&triple, &cache, &committed)).unwrap();
    let reference = lib(&committed, &triple);

    // A forged object stored under the user's own key: authentication cannot tell it from
    // a real one, so only not reading the cache keeps it out of `--check`.
    let planter = Cache::new(cache.clone());
    let mut planted = Vec::new();
    for (_, key) in object_entries(&cache) {
        let content = planter.get("obj", &key).expect("a good entry");
        if let Some(forged) = rewrite_shift(&content) {
            planter.put("obj", &key, &forged);
            planted.push((key, content));
        }
    }
    assert!(
        !planted.is_empty(),
        "no cached object has a shift to rewrite"
    );
    // The control: a build that reads the cache takes the planted code, so the check below
    // passes because it reads nothing, not because the entry goes unused.
    let other = tmp.path().join("through-the-cache");
    driver::build_stencils(&options(&triple, &cache, &other)).unwrap();
    assert!(
        lib(&other, &triple) != reference,
        "the planted entry was not used"
    );

    let mut check = options(&triple, &cache, &committed);
    check.check = true;
    let report = driver::build_stencils(&check)
        .unwrap_or_else(|e| panic!("--check took a planted cache entry: {e}"));
    assert_eq!(report.built, [triple.as_str()]);
    // It stores what it compiled, so the planted entry is replaced for later builds.
    for (key, content) in &planted {
        assert_eq!(planter.get("obj", key).as_ref(), Some(content), "obj-{key}");
    }
}

#[test]
fn a_cache_directory_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let triple = x86_elf();
    let tmp = tempfile::tempdir().unwrap();
    private_key(tmp.path());
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    std::fs::create_dir(&cache).unwrap();
    let refusal = |mode: u32| {
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(mode)).unwrap();
        driver::build_stencils(&options(&triple, &cache, &out))
            .expect_err("an unsafe cache directory is an error")
            .0
    };
    for (mode, who) in [
        (0o770, "its group"),
        (0o757, "others"),
        (0o777, "its group and others"),
    ] {
        let err = refusal(mode);
        assert!(
            err.contains(&format!(
                "cache directory {} is writable by {who} (owner uid",
                cache.display()
            )) && err.contains(&format!("mode {mode:04o}"))
                && err.contains(&format!("`chmod go-w {}`", cache.display()))
                && err.contains("$CPJIT_STENCIL_CACHE"),
            "{err}"
        );
        assert!(!out.exists(), "nothing was built");
    }
    // A directory of another user's (only root can make one to test with).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&cache, Some(65534), None).unwrap();
        let err = refusal(0o700);
        assert!(
            err.contains("is owned by uid 65534, not by you (uid 0)"),
            "{err}"
        );
    }

    // `--check` reads no entry, so it runs (and finds the missing crate stale) instead.
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o770)).unwrap();
    let mut check = options(&triple, &cache, &out);
    check.check = true;
    let err = driver::build_stencils(&check).unwrap_err().0;
    assert!(
        !err.contains("chmod") && err.contains("stale file(s)"),
        "{err}"
    );
}

//! The command line, run in-process: r0 on stdout, one-line errors naming the instruction.

use ebpf_jit::cli::main_with;

fn run(args: &[&str]) -> (u8, String, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = main_with(&args, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

fn programs(name: &str) -> String {
    format!("{}/programs/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn runs_programs_with_both_engines() {
    for engine in ["jit", "interp"] {
        let (code, out, _) = run(&["run", &programs("sum.bin"), "--engine", engine]);
        assert_eq!((code, out.as_str()), (0, "5050\n"));
        let (code, out, _) = run(&[
            "run",
            &programs("load.bin"),
            "--mem",
            &programs("load.mem"),
            "--engine",
            engine,
        ]);
        assert_eq!((code, out.as_str()), (0, "100992003\n"));
    }
}

#[test]
fn reports_faults_and_refused_programs_in_one_line() {
    let dir = std::env::temp_dir().join(format!("ebpf-jit-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A 4-byte load at offset 2 of an empty memory.
    let (code, out, err) = run(&["run", &programs("load.bin")]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.contains("instruction #0: out-of-bounds load of 4 bytes"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
    // A program that does not end in a jump.
    let bad = dir.join("bad.bin");
    std::fs::write(&bad, [0xb7, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    let (code, _, err) = run(&["run", bad.to_str().unwrap(), "--engine", "interp"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("instruction #0: refused by the verifier"),
        "{err}"
    );
    // Usage.
    assert_eq!(run(&["run"]).0, 2);
    assert_eq!(run(&["run", "x", "--engine", "llvm"]).0, 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

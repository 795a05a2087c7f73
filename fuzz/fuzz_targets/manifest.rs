//! Fuzzes the template-set manifest and target-file parsers: any bytes give a parsed value or
//! an error naming the file, never a panic. Seeds: `templates/manifest.toml`, `targets/*.toml`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| cpjit_fuzz_harness::parse_manifest_and_target(bytes));

//! Fuzzes the Coff reader: any bytes, read as an object of either architecture, give stencils
//! or an `ObjectError`, never a panic. Seeds: `toolchain/tests/golden/obj/*/` (Coff objects).
#![no_main]

use cpjit_model::ObjectFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| cpjit_fuzz_harness::read_object(ObjectFormat::Coff, bytes));

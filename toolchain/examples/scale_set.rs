//! Writes the generated CPython-style scale set (`cpjit_toolchain::scale_set`):
//! `cargo run -p cpjit-toolchain --example scale_set -- DIR [OPS [HEADER_LINES [BATCH_SIZE
//! [FORM [PARTS]]]]]` (defaults: 300 ops, a 20,000-line header, the bench's full size;
//! BATCH_SIZE 0, the default, compiles one unit per clang run; FORM `units`, the default, or
//! `family` (one family over one template); PARTS > 1 cuts the header into a chain).

use cpjit_toolchain::scale_set::ScaleSet;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: scale_set DIR [OPS [HEADER_LINES [BATCH_SIZE [units|family [PARTS]]]]]";
    let dir = args.first().expect(usage);
    let number = |i: usize, default: usize| {
        args.get(i).map_or(default, |s| {
            s.parse().unwrap_or_else(|_| panic!("{usage}: `{s}`"))
        })
    };
    let set = ScaleSet {
        ops: number(1, 300),
        header_lines: number(2, 20_000),
        batch_size: Some(number(3, 0)).filter(|&n| n > 0),
    };
    let path = std::path::Path::new(dir);
    match args.get(4).map_or("units", String::as_str) {
        "units" => set.write(path),
        "family" => set.write_family(path),
        other => panic!("{usage}: `{other}`"),
    }
    .unwrap_or_else(|e| panic!("cannot write {dir}: {e}"));
    let parts = number(5, 1);
    if parts > 1 {
        ScaleSet::chain_header(path, parts).unwrap_or_else(|e| panic!("cannot write {dir}: {e}"));
    }
    println!(
        "{dir}: {} ops, {} object kinds in include/scale.h",
        set.ops,
        set.kinds()
    );
}

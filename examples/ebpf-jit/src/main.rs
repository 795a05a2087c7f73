//! `ebpf-jit run PROG.bin [--mem FILE] [--mbuff FILE] [--engine jit|interp]` (see
//! `ebpf_jit::cli`).

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = ebpf_jit::cli::main_with(&args, &mut std::io::stdout(), &mut std::io::stderr());
    std::process::ExitCode::from(code)
}

//! The stack-jit CLI: runs a built-in program in one mode, or times the interpreter against
//! both JIT modes.
//!
//! ```text
//! stack-jit run PROGRAM [N] [--mode interp|uncached|cached]
//! stack-jit bench [--rounds R] [--size N]
//! ```
//! PROGRAM is `collatz`, `series` or `fib`. The bench runs `collatz N` (default 50,000) and
//! `series 50N`.

use stack_jit::{interpret, programs, Compiler, Mode, Op};
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "usage: stack-jit run collatz|series|fib [N] [--mode interp|uncached|cached]\n       stack-jit bench [--rounds R] [--size N]";

fn program(name: &str, n: Option<i64>) -> Result<Vec<Op>, String> {
    Ok(match name {
        "collatz" => programs::collatz(n.unwrap_or(300_000)),
        "series" => programs::series(n.unwrap_or(20_000_000)),
        "fib" => programs::fib_mix(n.unwrap_or(20)),
        other => return Err(format!("no program `{other}` (collatz, series or fib)")),
    })
}

/// The value of option `name` in `args`, removed from it.
fn option(args: &mut Vec<String>, name: &str) -> Result<Option<String>, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(None),
        Some(i) if i + 1 < args.len() => {
            let v = args.remove(i + 1);
            args.remove(i);
            Ok(Some(v))
        }
        Some(_) => Err(format!("{name} needs a value")),
    }
}

fn run(mut args: Vec<String>) -> Result<(), String> {
    let mode = option(&mut args, "--mode")?;
    let (name, n) = match args.as_slice() {
        [name] => (name, None),
        [name, n] => (
            name,
            Some(
                n.parse()
                    .map_err(|_| format!("N: `{n}` is not an integer"))?,
            ),
        ),
        _ => return Err(USAGE.into()),
    };
    let ops = program(name, n)?;
    let outcome = match mode.as_deref().unwrap_or("cached") {
        "interp" => interpret(&ops).map_err(|e| e.to_string())?,
        m @ ("uncached" | "cached") => {
            let mode = if m == "cached" {
                Mode::Cached
            } else {
                Mode::Uncached
            };
            let compiler = Compiler::new().map_err(|e| e.to_string())?;
            compiler
                .compile(&ops, mode)
                .map_err(|e| e.to_string())?
                .run()
        }
        other => {
            return Err(format!(
                "--mode: no mode `{other}` (interp, uncached or cached)"
            ))
        }
    };
    for v in &outcome.output {
        println!("{v}");
    }
    println!("result {}", outcome.result);
    Ok(())
}

/// Median, min and max of `times` (milliseconds).
fn summary(times: &mut [f64]) -> (f64, f64, f64) {
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[0], times[times.len() - 1])
}

fn bench(mut args: Vec<String>) -> Result<(), String> {
    let rounds: usize = option(&mut args, "--rounds")?
        .map(|r| {
            r.parse()
                .map_err(|_| format!("--rounds: `{r}` is not a count"))
        })
        .transpose()?
        .unwrap_or(7);
    let size: i64 = option(&mut args, "--size")?
        .map(|r| {
            r.parse()
                .map_err(|_| format!("--size: `{r}` is not an integer"))
        })
        .transpose()?
        .unwrap_or(50_000);
    if !args.is_empty() || rounds == 0 || size <= 0 {
        return Err(USAGE.into());
    }
    let compiler = Compiler::new().map_err(|e| e.to_string())?;
    println!("{rounds} rounds, interpreter / uncached JIT / cached JIT alternated per round; run time only (ms: median, min-max)");
    for (name, n) in [("collatz", size), ("series", 50 * size)] {
        let ops = program(name, Some(n))?;
        let uncached = compiler
            .compile(&ops, Mode::Uncached)
            .map_err(|e| e.to_string())?;
        let cached = compiler
            .compile(&ops, Mode::Cached)
            .map_err(|e| e.to_string())?;
        let want = interpret(&ops).map_err(|e| e.to_string())?;
        // Compile times (verify, push, finish), alternated, in microseconds.
        let mut compile = [vec![], vec![]];
        for _ in 0..rounds * 10 {
            for (k, mode) in [Mode::Uncached, Mode::Cached].into_iter().enumerate() {
                let t = Instant::now();
                let c = compiler.compile(&ops, mode).map_err(|e| e.to_string())?;
                compile[k].push(t.elapsed().as_secs_f64() * 1e6);
                drop(c);
            }
        }
        let [cu, cc] = compile.map(|mut t| summary(&mut t));
        let mut times = [vec![], vec![], vec![]];
        for _ in 0..rounds {
            let t = Instant::now();
            let i = interpret(&ops).map_err(|e| e.to_string())?;
            times[0].push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let u = uncached.run();
            times[1].push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let c = cached.run();
            times[2].push(t.elapsed().as_secs_f64() * 1e3);
            if i != want || u != want || c != want {
                return Err(format!("{name}: the modes disagree ({i:?}, {u:?}, {c:?})"));
            }
        }
        let [i, u, c] = times.map(|mut t| summary(&mut t));
        println!(
            "{name} {n} ({} ops; {} and {} instances, {} and {} B of code): interp {:.1} ({:.1}-{:.1}), uncached {:.1} ({:.1}-{:.1}), cached {:.1} ({:.1}-{:.1}); cached is {:.1}x the interpreter, {:.1}x uncached (uncached {:.1}x the interpreter)",
            ops.len(),
            uncached.instances(),
            cached.instances(),
            uncached.code_bytes().len(),
            cached.code_bytes().len(),
            i.0, i.1, i.2, u.0, u.1, u.2, c.0, c.1, c.2,
            i.0 / c.0,
            u.0 / c.0,
            i.0 / u.0,
        );
        println!(
            "{:width$}  compile (us: verify, push, finish): uncached {:.1} ({:.1}-{:.1}), cached {:.1} ({:.1}-{:.1})",
            "",
            cu.0, cu.1, cu.2, cc.0, cc.1, cc.2,
            width = name.len(),
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => run(args.split_off(1)),
        Some("bench") => bench(args.split_off(1)),
        _ => Err(USAGE.into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stack-jit: {e}");
            ExitCode::FAILURE
        }
    }
}

//! The assembler: reads the VM's text format into a [`Program`], reporting errors with line
//! and column, and verifies every function's stack discipline.
//!
//! ```text
//! # comment
//! func add3(a, b, c)      # parameters are the first locals
//!   locals t              # more locals
//!   load a
//!   load b
//!   add
//!   ...
//!   return
//! end
//! global LIMIT 1000       # a global variable with its initial value (default none)
//! func main()             # the entry point, no parameters
//! loop:                   # a label
//!   ...
//!   jump loop             # a jump to an earlier label is a loop back-edge
//! end
//! ```
//! Statements are separated by line ends or `;`; `#` starts a comment.
//! Instructions are the bytecodes of `ops.def` in lower case with their operands: a local
//! name, a constant (`12`, `-1.5e3`, `nan`, `inf`, `-0.0`, `true`, `false`, `none`), a label,
//! a function name (`call f` passes as many arguments as `f` has parameters) or a count
//! (`print 2`, `build_list 3`; `print` alone prints one value).

use crate::abi::Inst;
use crate::ops::{self, op, OperandKind};
use crate::value::Value;
use std::collections::HashMap;
use std::fmt;

/// One function's code and what the assembler knows about it.
#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub params: usize,
    /// Parameters first, then the other locals.
    pub locals: Vec<String>,
    pub code: Vec<Inst>,
    /// (line, column) of each instruction.
    pub lines: Vec<(u32, u32)>,
    /// The deepest the value stack gets.
    pub max_stack: usize,
    /// The value stack's depth before each instruction (the same on every path to it; 0
    /// for an instruction no path reaches).
    pub depths: Vec<u32>,
}

/// A whole program; `main` is the entry point.
#[derive(Clone, Debug)]
pub struct Program {
    pub functions: Vec<Function>,
    pub main: usize,
    /// Global variables (declared at top level: `global NAME [constant]`) and their
    /// initial values.
    pub globals: Vec<(String, Value)>,
}

/// An error in a program's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: u32,
    pub col: u32,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for ParseError {}

fn err<T>(line: u32, col: u32, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        line,
        col,
        message: message.into(),
    })
}

/// A word of a line and its 1-based column.
#[derive(Clone, Copy)]
struct Word<'a> {
    text: &'a str,
    col: u32,
}

fn words(line: &str) -> Vec<Word<'_>> {
    let line = line.split('#').next().unwrap();
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        let sep = c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == ';';
        match (start, sep) {
            (None, false) => start = Some(i),
            (Some(s), true) => {
                out.push(Word {
                    text: &line[s..i],
                    col: s as u32 + 1,
                });
                start = None;
            }
            _ => {}
        }
        if c == ';' {
            out.push(Word {
                text: ";",
                col: i as u32 + 1,
            });
        }
    }
    out
}

/// An instruction whose label or function operand is resolved after the whole text is read.
struct Pending {
    label: Option<(String, u32, u32)>,
    func: Option<(String, u32, u32)>,
}

struct FunctionText {
    f: Function,
    labels: HashMap<String, u32>,
    pending: Vec<Pending>,
    line: u32,
}

/// Parses a program.
pub fn parse(text: &str) -> Result<Program, ParseError> {
    let mut done: Vec<FunctionText> = Vec::new();
    let mut current: Option<FunctionText> = None;
    let mut globals: Vec<(String, Value)> = Vec::new();
    let mut last_line = 0;
    for (n, raw) in text.lines().enumerate() {
        let line = n as u32 + 1;
        last_line = line;
        for statement in words(raw).split(|w| w.text == ";") {
            let mut ws = statement.to_vec();
            if ws.is_empty() {
                continue;
            }
            if ws[0].text == "func" {
                if let Some(open) = &current {
                    return err(
                        line,
                        ws[0].col,
                        format!("`func` inside function `{}` (missing `end`)", open.f.name),
                    );
                }
                let Some(name) = ws.get(1) else {
                    return err(line, ws[0].col, "`func` needs a name");
                };
                check_ident(line, *name, "function name")?;
                if done.iter().any(|d| d.f.name == name.text) {
                    return err(
                        line,
                        name.col,
                        format!("function `{}` is defined twice", name.text),
                    );
                }
                let mut locals = Vec::new();
                for p in &ws[2..] {
                    check_ident(line, *p, "parameter name")?;
                    if locals.iter().any(|l| l == p.text) {
                        return err(
                            line,
                            p.col,
                            format!("parameter `{}` is declared twice", p.text),
                        );
                    }
                    locals.push(p.text.to_string());
                }
                current = Some(FunctionText {
                    f: Function {
                        name: name.text.to_string(),
                        params: locals.len(),
                        locals,
                        code: Vec::new(),
                        lines: Vec::new(),
                        max_stack: 0,
                        depths: Vec::new(),
                    },
                    labels: HashMap::new(),
                    pending: Vec::new(),
                    line,
                });
                continue;
            }
            if ws[0].text == "global" && current.is_none() {
                let Some(name) = ws.get(1) else {
                    return err(line, ws[0].col, "`global` needs a name");
                };
                check_ident(line, *name, "global name")?;
                if globals.iter().any(|(g, _)| g == name.text) {
                    return err(
                        line,
                        name.col,
                        format!("global `{}` is declared twice", name.text),
                    );
                }
                let value = match ws.get(2) {
                    Some(w) => parse_const(line, *w)?,
                    None => Value::NONE,
                };
                if let Some(extra) = ws.get(3) {
                    return err(line, extra.col, "unexpected text after the global's value");
                }
                globals.push((name.text.to_string(), value));
                continue;
            }
            let Some(cur) = current.as_mut() else {
                return err(
                    line,
                    ws[0].col,
                    format!("`{}` outside a function (expected `func`)", ws[0].text),
                );
            };
            if ws[0].text == "end" {
                if ws.len() > 1 {
                    return err(line, ws[1].col, "unexpected text after `end`");
                }
                done.push(current.take().unwrap());
                continue;
            }
            if ws[0].text == "locals" {
                for l in &ws[1..] {
                    check_ident(line, *l, "local name")?;
                    if cur.f.locals.iter().any(|x| x == l.text) {
                        return err(line, l.col, format!("local `{}` is declared twice", l.text));
                    }
                    cur.f.locals.push(l.text.to_string());
                }
                continue;
            }
            if let Some(label) = ws[0].text.strip_suffix(':') {
                check_ident(
                    line,
                    Word {
                        text: label,
                        col: ws[0].col,
                    },
                    "label",
                )?;
                if cur
                    .labels
                    .insert(label.to_string(), cur.f.code.len() as u32)
                    .is_some()
                {
                    return err(line, ws[0].col, format!("label `{label}` is defined twice"));
                }
                ws.remove(0);
                if ws.is_empty() {
                    continue;
                }
            }
            parse_instruction(cur, &globals, line, &ws)?;
        }
    }
    if let Some(open) = current {
        return err(
            last_line.max(1),
            1,
            format!(
                "function `{}` (line {}) has no `end`",
                open.f.name, open.line
            ),
        );
    }
    resolve(done, globals)
}

fn check_ident(line: u32, w: Word<'_>, what: &str) -> Result<(), ParseError> {
    let ok = w
        .text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && w.text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        err(line, w.col, format!("`{}` is not a valid {what}", w.text))
    }
}

fn parse_instruction(
    cur: &mut FunctionText,
    globals: &[(String, Value)],
    line: u32,
    ws: &[Word<'_>],
) -> Result<(), ParseError> {
    let mnemonic = ws[0];
    let id = ops::by_name(&mnemonic.text.to_ascii_uppercase())
        .filter(|&id| {
            let info = ops::info(id);
            info.bytecode && id != op::JUMP_BACKWARD && id != op::ENTER_EXECUTOR
        })
        .ok_or_else(|| ParseError {
            line,
            col: mnemonic.col,
            message: format!("unknown instruction `{}`", mnemonic.text),
        })?;
    let info = ops::info(id);
    let mut inst = Inst {
        op: id,
        target: 0,
        arg0: 0,
        arg1: 0,
    };
    let mut pending = Pending {
        label: None,
        func: None,
    };
    let mut args = ws[1..].iter();
    let mut next_word = |what: &str| {
        args.next().copied().ok_or_else(|| ParseError {
            line,
            col: mnemonic.col,
            message: format!("`{}` needs {what}", mnemonic.text),
        })
    };
    if info.jumps {
        let w = next_word("a label")?;
        pending.label = Some((w.text.to_string(), line, w.col));
    }
    for (i, kind) in info.operands.iter().enumerate() {
        let value = match kind {
            OperandKind::Local => {
                let w = next_word("a local name")?;
                let idx = cur
                    .f
                    .locals
                    .iter()
                    .position(|l| l == w.text)
                    .ok_or_else(|| ParseError {
                        line,
                        col: w.col,
                        message: format!("unknown local `{}` in function `{}`", w.text, cur.f.name),
                    })?;
                idx as u64
            }
            OperandKind::Global => {
                let w = next_word("a global name")?;
                globals
                    .iter()
                    .position(|(g, _)| g == w.text)
                    .ok_or_else(|| ParseError {
                        line,
                        col: w.col,
                        message: format!(
                            "unknown global `{}` (declare it with `global` before use)",
                            w.text
                        ),
                    })? as u64
            }
            OperandKind::Const => parse_const(line, next_word("a constant")?)?.0,
            OperandKind::Func => {
                let w = next_word("a function name")?;
                pending.func = Some((w.text.to_string(), line, w.col));
                0
            }
            OperandKind::Count if id == op::CALL => 0, // the callee's arity, filled in later
            OperandKind::Count => match (id, ws.get(1 + i)) {
                (op::PRINT, None) => 1,
                _ => {
                    let w = next_word("a count")?;
                    w.text.parse::<u32>().map_err(|_| ParseError {
                        line,
                        col: w.col,
                        message: format!("`{}` is not a count", w.text),
                    })? as u64
                }
            },
            other => unreachable!("bytecode {} has a {other:?} operand", info.name),
        };
        if i == 0 {
            inst.arg0 = value;
        } else {
            inst.arg1 = value;
        }
    }
    if let Some(extra) = args.next() {
        return err(
            line,
            extra.col,
            format!(
                "unexpected operand `{}` for `{}`",
                extra.text, mnemonic.text
            ),
        );
    }
    cur.f.code.push(inst);
    cur.f.lines.push((line, mnemonic.col));
    cur.pending.push(pending);
    Ok(())
}

/// Parses a constant literal.
pub fn parse_const_text(text: &str) -> Option<Value> {
    match text {
        "true" | "True" => return Some(Value::TRUE),
        "false" | "False" => return Some(Value::FALSE),
        "none" | "None" => return Some(Value::NONE),
        "nan" | "-nan" => return Some(Value::float(f64::NAN)),
        "inf" => return Some(Value::float(f64::INFINITY)),
        "-inf" => return Some(Value::float(f64::NEG_INFINITY)),
        _ => {}
    }
    if text.contains(['.', 'e', 'E']) {
        return text
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Value::float);
    }
    text.parse::<i64>().ok().and_then(Value::int)
}

fn parse_const(line: u32, w: Word<'_>) -> Result<Value, ParseError> {
    parse_const_text(w.text).ok_or_else(|| ParseError {
        line,
        col: w.col,
        message: if w.text.parse::<i128>().is_ok() {
            format!(
                "integer constant `{}` is outside the 48-bit int range",
                w.text
            )
        } else {
            format!("`{}` is not a constant", w.text)
        },
    })
}

fn resolve(texts: Vec<FunctionText>, globals: Vec<(String, Value)>) -> Result<Program, ParseError> {
    let names: HashMap<String, (usize, usize)> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| (t.f.name.clone(), (i, t.f.params)))
        .collect();
    let mut functions = Vec::new();
    for mut t in texts {
        let len = t.f.code.len();
        for (pc, p) in t.pending.iter().enumerate() {
            let inst = &mut t.f.code[pc];
            if let Some((label, line, col)) = &p.label {
                let target = *t.labels.get(label).ok_or_else(|| ParseError {
                    line: *line,
                    col: *col,
                    message: format!("unknown label `{label}` in function `{}`", t.f.name),
                })?;
                if target as usize >= len {
                    return err(*line, *col, format!("label `{label}` is at the end of function `{}`, after its last instruction", t.f.name));
                }
                inst.target = target;
                if target as usize <= pc {
                    if inst.op != op::JUMP {
                        return err(*line, *col, format!("conditional jump back to `{label}`: loops must close with `jump` (use a forward conditional jump out of the loop)"));
                    }
                    inst.op = op::JUMP_BACKWARD;
                }
            }
            if let Some((name, line, col)) = &p.func {
                let &(idx, arity) = names.get(name).ok_or_else(|| ParseError {
                    line: *line,
                    col: *col,
                    message: format!("unknown function `{name}`"),
                })?;
                inst.arg0 = idx as u64;
                inst.arg1 = arity as u64;
            }
        }
        (t.f.max_stack, t.f.depths) = check_stack(&t.f)?;
        functions.push(t.f);
    }
    let main = functions
        .iter()
        .position(|f| f.name == "main")
        .ok_or_else(|| ParseError {
            line: 1,
            col: 1,
            message: "the program has no function `main`".into(),
        })?;
    if functions[main].params != 0 {
        return err(1, 1, "function `main` must have no parameters");
    }
    Ok(Program {
        functions,
        main,
        globals,
    })
}

/// Checks that every path keeps the stack balanced (same depth wherever paths join, never
/// below zero) and ends in `return` or a jump; returns the maximum depth.
fn check_stack(f: &Function) -> Result<(usize, Vec<u32>), ParseError> {
    if f.code.is_empty() {
        return err(1, 1, format!("function `{}` has no instructions", f.name));
    }
    let mut depth: Vec<Option<u64>> = vec![None; f.code.len()];
    let mut work = vec![(0usize, 0u64)];
    let mut max = 0;
    while let Some((pc, d)) = work.pop() {
        let (line, col) = f.lines[pc];
        match depth[pc] {
            Some(seen) if seen == d => continue,
            Some(seen) => {
                return err(
                    line,
                    col,
                    format!(
                    "stack depth {d} here differs from {seen} on another path to this instruction"
                ),
                )
            }
            None => depth[pc] = Some(d),
        }
        let inst = f.code[pc];
        let info = ops::info(inst.op);
        let args = [inst.arg0, inst.arg1];
        let pop = info.pop.count(args);
        if pop > d {
            return err(
                line,
                col,
                format!(
                    "`{}` needs {pop} values on the stack, has {d}",
                    info.name.to_ascii_lowercase()
                ),
            );
        }
        let after = d - pop + info.push.count(args);
        max = max.max(after).max(d);
        if inst.op == op::RETURN {
            continue;
        }
        if info.jumps {
            work.push((inst.target as usize, after));
        }
        if inst.op != op::JUMP && inst.op != op::JUMP_BACKWARD {
            if pc + 1 >= f.code.len() {
                return err(line, col, format!("function `{}` runs past its last instruction (end it with `return` or `jump`)", f.name));
            }
            work.push((pc + 1, after));
        }
    }
    Ok((
        max as usize,
        depth.iter().map(|d| d.unwrap_or(0) as u32).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_a_loop() {
        let p = parse("func main()\n locals i\n const 0\n store i\nl: load i\n const 3\n lt\n jump_if_false out\n jump l\nout: const none\n return\nend\n").unwrap();
        let f = &p.functions[p.main];
        assert_eq!(f.code[6].op, op::JUMP_BACKWARD);
        assert_eq!(f.code[6].target, 2);
        assert_eq!(f.max_stack, 2);
    }

    #[test]
    fn errors_name_line_and_column() {
        assert_eq!(
            error_of("func main()\n  lod x\nend"),
            "2:3: unknown instruction `lod`"
        );
        assert_eq!(
            error_of("func main()\n  load x\nend"),
            "2:8: unknown local `x` in function `main`"
        );
        assert_eq!(
            error_of("func main()\n  const 99999999999999999\nend"),
            "2:9: integer constant `99999999999999999` is outside the 48-bit int range"
        );
        assert_eq!(
            error_of("func main()\n  add\n  return\nend"),
            "2:3: `add` needs 2 values on the stack, has 0"
        );
        assert_eq!(
            error_of("func main()\n  const 1\n  jump nowhere\nend"),
            "3:8: unknown label `nowhere` in function `main`"
        );
        assert_eq!(
            error_of("func main()\n  const 1\n  call g\n  return\nend"),
            "3:8: unknown function `g`"
        );
        assert_eq!(
            error_of("func main()\n  const 1\n"),
            "2:1: function `main` (line 1) has no `end`"
        );
        assert_eq!(
            error_of("func main()\n  const 1\n  pop\nend"),
            "3:3: function `main` runs past its last instruction (end it with `return` or `jump`)"
        );
        assert!(error_of("func f()\n const 1\n return\nend").contains("no function `main`"));
    }

    #[test]
    fn constants() {
        assert_eq!(
            parse_const_text("-0.0")
                .unwrap()
                .as_float()
                .unwrap()
                .to_bits(),
            (-0.0f64).to_bits()
        );
        assert!(parse_const_text("nan")
            .unwrap()
            .as_float()
            .unwrap()
            .is_nan());
        assert_eq!(parse_const_text("-7").unwrap().as_int(), Some(-7));
        assert_eq!(parse_const_text("none"), Some(Value::NONE));
        assert!(parse_const_text("1e999").is_none());
    }
}

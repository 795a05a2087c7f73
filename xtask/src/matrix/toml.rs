//! A small TOML reader for the project's own configuration files (`ci/matrix.toml`,
//! `targets/*.toml`), so that xtask stays free of dependencies.
//!
//! Supported: comments, `[table]`, `[dotted.table]`, `[[array.of.tables]]`, bare and quoted
//! keys, basic and literal strings (single line), integers, booleans, arrays (may span
//! lines) and inline tables. Anything else is an error naming the file, line and column,
//! never a silent misread.

use std::collections::BTreeMap;

/// A TOML value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    String(String),
    Integer(i64),
    Boolean(bool),
    Array(Vec<Value>),
    Table(Table),
}

pub type Table = BTreeMap<String, Value>;

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Integer(_) => "integer",
            Value::Boolean(_) => "boolean",
            Value::Array(_) => "array",
            Value::Table(_) => "table",
        }
    }
}

/// Parses `text` (read from `file`, used in error messages) into its root table.
pub fn parse(file: &str, text: &str) -> Result<Table, String> {
    let mut p = Parser {
        file,
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
        col: 1,
    };
    p.document()
}

struct Parser<'a> {
    file: &'a str,
    chars: Vec<char>,
    pos: usize,
    line: usize,
    col: usize,
}

/// Where new `key = value` lines go: a path from the root, where an array-of-tables step
/// means its last element.
type Path = Vec<String>;

impl Parser<'_> {
    fn err<T>(&self, msg: impl std::fmt::Display) -> Result<T, String> {
        self.err_at((self.line, self.col), msg)
    }

    fn err_at<T>(
        &self,
        (line, col): (usize, usize),
        msg: impl std::fmt::Display,
    ) -> Result<T, String> {
        Err(format!("{}:{line}:{col}: {msg}", self.file))
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn expect(&mut self, want: char) -> Result<(), String> {
        match self.peek() {
            Some(c) if c == want => {
                self.bump();
                Ok(())
            }
            Some(c) => self.err(format!("expected `{want}`, found `{c}`")),
            None => self.err(format!("expected `{want}`, found end of file")),
        }
    }

    /// Skips spaces and tabs (not newlines).
    fn blank(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
    }

    /// Skips a comment up to (not including) the newline.
    fn comment(&mut self) {
        if self.peek() == Some('#') {
            while !matches!(self.peek(), None | Some('\n')) {
                self.bump();
            }
        }
    }

    /// Skips blanks, comments and newlines (inside arrays).
    fn space(&mut self) {
        loop {
            self.blank();
            self.comment();
            match self.peek() {
                Some('\n') | Some('\r') => {
                    self.bump();
                }
                _ => return,
            }
        }
    }

    /// After a statement: blanks, an optional comment, then a newline or end of file.
    fn end_of_line(&mut self) -> Result<(), String> {
        self.blank();
        self.comment();
        if self.peek() == Some('\r') {
            self.bump();
        }
        match self.peek() {
            None => Ok(()),
            Some('\n') => {
                self.bump();
                Ok(())
            }
            Some(c) => self.err(format!("expected end of line, found `{c}`")),
        }
    }

    fn document(&mut self) -> Result<Table, String> {
        let mut root = Table::new();
        let mut current: Path = Vec::new();
        loop {
            self.space();
            let Some(c) = self.peek() else {
                return Ok(root);
            };
            let at = (self.line, self.col);
            if c == '[' {
                self.bump();
                let array = self.peek() == Some('[');
                if array {
                    self.bump();
                }
                self.blank();
                let path = self.dotted_key()?;
                self.blank();
                self.expect(']')?;
                if array {
                    self.expect(']')?;
                }
                self.end_of_line()?;
                self.open_table(&mut root, &path, array)
                    .or_else(|e| self.err_at(at, e))?;
                current = path;
            } else {
                let key = self.dotted_key()?;
                self.blank();
                self.expect('=')?;
                self.blank();
                let value = self.value()?;
                self.end_of_line()?;
                let (last, parents) = key.split_last().expect("dotted_key is non-empty");
                let mut full = current.clone();
                full.extend(parents.iter().cloned());
                let table = self
                    .table_at(&mut root, &full)
                    .or_else(|e| self.err_at(at, e))?;
                if table.contains_key(last) {
                    return self.err_at(at, format!("duplicate key `{}`", key.join(".")));
                }
                table.insert(last.clone(), value);
            }
        }
    }

    /// Creates the table (or appends a table to the array) named by a header. Errors carry
    /// no position; the caller adds the header's.
    fn open_table(&self, root: &mut Table, path: &[String], array: bool) -> Result<(), String> {
        let (last, parents) = path.split_last().expect("dotted_key is non-empty");
        let parent = self.table_at(root, parents)?;
        match (parent.get_mut(last), array) {
            (None, false) => {
                parent.insert(last.clone(), Value::Table(Table::new()));
            }
            (None, true) => {
                parent.insert(last.clone(), Value::Array(vec![Value::Table(Table::new())]));
            }
            (Some(Value::Array(items)), true) => items.push(Value::Table(Table::new())),
            (Some(Value::Table(_)), false) => {
                // Allowed when only implicitly created by a dotted header so far; TOML
                // forbids redefinition, which we report.
                return Err(format!("table `[{}]` defined twice", path.join(".")));
            }
            (Some(other), _) => {
                return Err(format!(
                    "`{}` is already a {}, not a {}",
                    path.join("."),
                    other.type_name(),
                    if array { "array of tables" } else { "table" }
                ))
            }
        }
        Ok(())
    }

    /// The table at `path`, creating intermediate tables; an array of tables stands for its
    /// last element.
    fn table_at<'t>(&self, root: &'t mut Table, path: &[String]) -> Result<&'t mut Table, String> {
        let mut table = root;
        for (i, step) in path.iter().enumerate() {
            let entry = table
                .entry(step.clone())
                .or_insert_with(|| Value::Table(Table::new()));
            table = match entry {
                Value::Table(t) => t,
                Value::Array(items) => match items.last_mut() {
                    Some(Value::Table(t)) => t,
                    _ => {
                        return Err(format!(
                            "`{}` is an array of values, not of tables",
                            path[..=i].join(".")
                        ))
                    }
                },
                other => {
                    return Err(format!(
                        "`{}` is a {}, not a table",
                        path[..=i].join("."),
                        other.type_name()
                    ))
                }
            };
        }
        Ok(table)
    }

    fn dotted_key(&mut self) -> Result<Vec<String>, String> {
        let mut parts = vec![self.key()?];
        loop {
            self.blank();
            if self.peek() != Some('.') {
                return Ok(parts);
            }
            self.bump();
            self.blank();
            parts.push(self.key()?);
        }
    }

    fn key(&mut self) -> Result<String, String> {
        match self.peek() {
            Some('"') => self.basic_string(),
            Some('\'') => self.literal_string(),
            _ => {
                let mut key = String::new();
                while let Some(c) = self.peek() {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        key.push(c);
                        self.bump();
                    } else {
                        break;
                    }
                }
                if key.is_empty() {
                    return self.err("expected a key");
                }
                Ok(key)
            }
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some('"') => {
                if self.chars[self.pos..].starts_with(&['"', '"', '"']) {
                    return self.err("multi-line strings are not supported here");
                }
                self.basic_string().map(Value::String)
            }
            Some('\'') => self.literal_string().map(Value::String),
            Some('[') => self.array(),
            Some('{') => self.inline_table(),
            Some('t' | 'f') => {
                let word = self.word();
                match word.as_str() {
                    "true" => Ok(Value::Boolean(true)),
                    "false" => Ok(Value::Boolean(false)),
                    _ => self.err(format!("expected a value, found `{word}`")),
                }
            }
            Some(c) if c.is_ascii_digit() || c == '-' || c == '+' => {
                let word = self.word();
                match word.replace('_', "").parse::<i64>() {
                    Ok(n) => Ok(Value::Integer(n)),
                    Err(_) => self.err(format!(
                        "`{word}` is not a supported number (integers only)"
                    )),
                }
            }
            Some(c) => self.err(format!("expected a value, found `{c}`")),
            None => self.err("expected a value, found end of file"),
        }
    }

    fn word(&mut self) -> String {
        let mut w = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.' | ':') {
                w.push(c);
                self.bump();
            } else {
                break;
            }
        }
        w
    }

    fn array(&mut self) -> Result<Value, String> {
        self.expect('[')?;
        let mut items = Vec::new();
        loop {
            self.space();
            if self.peek() == Some(']') {
                self.bump();
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.space();
            match self.peek() {
                Some(',') => {
                    self.bump();
                }
                Some(']') => {}
                _ => return self.err("expected `,` or `]` in array"),
            }
        }
    }

    fn inline_table(&mut self) -> Result<Value, String> {
        self.expect('{')?;
        let mut table = Table::new();
        self.blank();
        if self.peek() == Some('}') {
            self.bump();
            return Ok(Value::Table(table));
        }
        loop {
            self.blank();
            let key = self.key()?;
            self.blank();
            self.expect('=')?;
            self.blank();
            let value = self.value()?;
            if table.insert(key.clone(), value).is_some() {
                return self.err(format!("duplicate key `{key}` in inline table"));
            }
            self.blank();
            match self.bump() {
                Some(',') => continue,
                Some('}') => return Ok(Value::Table(table)),
                _ => return self.err("expected `,` or `}` in inline table"),
            }
        }
    }

    fn basic_string(&mut self) -> Result<String, String> {
        self.expect('"')?;
        let mut s = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return self.err("unterminated string"),
                Some('"') => return Ok(s),
                Some('\\') => match self.bump() {
                    Some('"') => s.push('"'),
                    Some('\\') => s.push('\\'),
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some(c) => return self.err(format!("unsupported escape `\\{c}`")),
                    None => return self.err("unterminated string"),
                },
                Some(c) => s.push(c),
            }
        }
    }

    fn literal_string(&mut self) -> Result<String, String> {
        self.expect('\'')?;
        let mut s = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return self.err("unterminated string"),
                Some('\'') => return Ok(s),
                Some(c) => s.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    #[test]
    fn tables_arrays_of_tables_and_values() {
        let t = parse(
            "t.toml",
            r#"
# comment
top = "a" # trailing
[suites.vm]
package = 'cpjit-vm'
args = [
  "--skip", # why
  "slow",
]
[[row]]
triple = "x"
n = -1_000
ok = true
env = { A = "1", "B" = "2" }
[[row]]
triple = "y"
"#,
        )
        .unwrap();
        assert_eq!(t["top"], s("a"));
        let Value::Table(suites) = &t["suites"] else {
            panic!()
        };
        let Value::Table(vm) = &suites["vm"] else {
            panic!()
        };
        assert_eq!(vm["package"], s("cpjit-vm"));
        assert_eq!(vm["args"], Value::Array(vec![s("--skip"), s("slow")]));
        let Value::Array(rows) = &t["row"] else {
            panic!()
        };
        assert_eq!(rows.len(), 2);
        let Value::Table(r0) = &rows[0] else { panic!() };
        assert_eq!(r0["n"], Value::Integer(-1000));
        assert_eq!(r0["ok"], Value::Boolean(true));
        let Value::Table(env) = &r0["env"] else {
            panic!()
        };
        assert_eq!(env["B"], s("2"));
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let e = parse("m.toml", "a = 1\nb = [1, 2\n").unwrap_err();
        assert!(e.starts_with("m.toml:3:"), "{e}");
        let e = parse("m.toml", "a = 1\na = 2\n").unwrap_err();
        assert!(
            e.contains("m.toml:2:") && e.contains("duplicate key `a`"),
            "{e}"
        );
        let e = parse("m.toml", "[x]\n[x]\n").unwrap_err();
        assert!(e.contains("defined twice"), "{e}");
        let e = parse("m.toml", "a = 1.5\n").unwrap_err();
        assert!(e.contains("integers only"), "{e}");
        let e = parse("m.toml", "a = \"x\" b\n").unwrap_err();
        assert!(e.contains("expected end of line"), "{e}");
    }
}

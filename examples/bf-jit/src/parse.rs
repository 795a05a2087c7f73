//! Brainfuck source to ops: runs of `+`/`-` and `<`/`>` folded into one op each, `[-]` and
//! `[+]` recognised as [`Op::Clear`], loops matched (an unmatched bracket is an error naming
//! its byte offset). Any other byte is a comment.

use std::fmt;

/// One op; each maps to one stencil of the template set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Add to the current cell (mod 256).
    Add(u8),
    /// Move the data pointer by this many cells.
    Move(isize),
    /// Set the current cell to zero.
    Clear,
    /// `[`: jump to the op after the matching `LoopEnd` (its index + 1) when the cell is 0.
    LoopStart {
        end: usize,
    },
    /// `]`: jump to the op after the matching `LoopStart` when the cell is not 0.
    LoopEnd {
        start: usize,
    },
    Output,
    Input,
}

/// An unmatched bracket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset in the source.
    pub offset: usize,
    pub bracket: char,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unmatched `{}` at byte {}", self.bracket, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// Parses `source` into ops with matched loops.
pub fn parse(source: &[u8]) -> Result<Vec<Op>, ParseError> {
    let mut ops: Vec<Op> = Vec::new();
    // Open loops: (op index, source offset).
    let mut open: Vec<(usize, usize)> = Vec::new();
    for (offset, &byte) in source.iter().enumerate() {
        match byte {
            b'+' | b'-' => {
                let d: u8 = if byte == b'+' { 1 } else { 255 };
                match ops.last_mut() {
                    Some(Op::Add(n)) => *n = n.wrapping_add(d),
                    _ => ops.push(Op::Add(d)),
                }
            }
            b'<' | b'>' => {
                let d: isize = if byte == b'>' { 1 } else { -1 };
                match ops.last_mut() {
                    Some(Op::Move(n)) => *n += d,
                    _ => ops.push(Op::Move(d)),
                }
            }
            b'.' => ops.push(Op::Output),
            b',' => ops.push(Op::Input),
            b'[' => {
                open.push((ops.len(), offset));
                ops.push(Op::LoopStart { end: usize::MAX });
            }
            b']' => {
                let (start, _) = open.pop().ok_or(ParseError {
                    offset,
                    bracket: ']',
                })?;
                if let [Op::LoopStart { .. }, Op::Add(1 | 255)] = ops[start..] {
                    ops.truncate(start);
                    ops.push(Op::Clear);
                    continue;
                }
                let end = ops.len();
                ops[start] = Op::LoopStart { end };
                ops.push(Op::LoopEnd { start });
            }
            _ => {}
        }
    }
    if let Some(&(_, offset)) = open.first() {
        return Err(ParseError {
            offset,
            bracket: '[',
        });
    }
    // Folded runs that cancel out are no-ops.
    ops.retain(|op| !matches!(op, Op::Add(0) | Op::Move(0)));
    renumber_loops(&mut ops);
    Ok(ops)
}

/// Re-matches loop indices after ops were removed.
fn renumber_loops(ops: &mut [Op]) {
    let mut open = Vec::new();
    for i in 0..ops.len() {
        match ops[i] {
            Op::LoopStart { .. } => open.push(i),
            Op::LoopEnd { .. } => {
                let start = open.pop().expect("loops were matched while parsing");
                ops[start] = Op::LoopStart { end: i };
                ops[i] = Op::LoopEnd { start };
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_runs_and_clears() {
        assert_eq!(
            parse(b"+++-->><[-]x.").unwrap(),
            [Op::Add(1), Op::Move(1), Op::Clear, Op::Output]
        );
        assert_eq!(parse(b"+-<>").unwrap(), []);
    }

    #[test]
    fn matches_loops_after_removing_no_ops() {
        assert_eq!(
            parse(b"+-[>+<-]").unwrap(),
            [
                Op::LoopStart { end: 5 },
                Op::Move(1),
                Op::Add(1),
                Op::Move(-1),
                Op::Add(255),
                Op::LoopEnd { start: 0 },
            ]
        );
    }

    #[test]
    fn unmatched_brackets_name_their_offset() {
        assert_eq!(
            parse(b"+]").unwrap_err().to_string(),
            "unmatched `]` at byte 1"
        );
        assert_eq!(
            parse(b"[[]").unwrap_err(),
            ParseError {
                offset: 0,
                bracket: '['
            }
        );
    }
}

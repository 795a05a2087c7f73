//! One walk over preprocessed C text for the batch's recognisers (issue 43): the bytes
//! that are code, with string and character literals and directive lines (line markers,
//! kept `#pragma`s) stepped over, so that a brace or a word inside them is never taken
//! for structure. The name finder and the entry-body cutter both read text this way.

/// The code bytes of `text` from a start, each with its index; literals and directive
/// lines are not yielded.
pub struct CodeBytes<'a> {
    text: &'a str,
    at: usize,
    line_start: bool,
}

impl<'a> CodeBytes<'a> {
    /// A walk from `at`; `line_start` says whether `at` begins a line (a `#` there opens a
    /// directive).
    pub fn new(text: &'a str, at: usize, line_start: bool) -> Self {
        CodeBytes {
            text,
            at,
            line_start,
        }
    }

    /// Goes on from `at` (past a word the caller read whole); the bytes skipped are code
    /// that ends no line.
    pub fn resume_at(&mut self, at: usize) {
        self.at = at;
    }
}

impl Iterator for CodeBytes<'_> {
    type Item = (usize, u8);

    fn next(&mut self) -> Option<(usize, u8)> {
        let bytes = self.text.as_bytes();
        while self.at < bytes.len() {
            let i = self.at;
            let c = bytes[i];
            if self.line_start && c == b'#' {
                self.at = self.text[i..].find('\n').map_or(bytes.len(), |n| i + n);
                continue;
            }
            self.line_start = c == b'\n' || (self.line_start && (c == b' ' || c == b'\t'));
            if c == b'"' || c == b'\'' {
                // To the closing quote (or the line's end: an unterminated literal), then past it.
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != c && bytes[j] != b'\n' {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                self.at = j + 1;
                continue;
            }
            self.at = i + 1;
            return Some((i, c));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::CodeBytes;

    fn code(text: &str, line_start: bool) -> String {
        CodeBytes::new(text, 0, line_start)
            .map(|(_, c)| c as char)
            .collect()
    }

    #[test]
    fn literals_and_directive_lines_are_stepped_over() {
        let text = "# 1 \"a.h\"\nint f(){ s(\"{\\\"}\", '}'); }\n  #pragma x {\ng";
        assert_eq!(code(text, true), "\nint f(){ s(, ); }\n  \ng");
    }

    #[test]
    fn a_hash_inside_a_line_is_code_and_the_start_decides_the_first_line() {
        assert_eq!(code("a # b", true), "a # b");
        assert_eq!(code("#x\ny", false), "#x\ny");
        assert_eq!(code("#x\ny", true), "\ny");
    }

    #[test]
    fn an_unterminated_literal_ends_with_its_line() {
        assert_eq!(code("a \"b\nc {", true), "a c {");
    }

    #[test]
    fn indices_are_the_texts() {
        let text = "x 'y' {";
        let got: Vec<usize> = CodeBytes::new(text, 0, true).map(|(i, _)| i).collect();
        assert_eq!(got, [0, 1, 5, 6]);
    }
}

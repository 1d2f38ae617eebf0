//! Where a JSON Pointer lands in a JSON text: the line and column the editor marks for a
//! diagnostic. A pointer to something absent (a missing field) lands on its nearest parent.

/// The 1-based line and column of the value `pointer` names in `text`, or of its nearest
/// parent that the text has; `None` when the text is not JSON or too deep to scan.
pub fn locate(text: &str, pointer: &str) -> Option<(usize, usize)> {
    if switchboard_core::json_bounds::text_depth(text.as_bytes()) > MAX_DEPTH {
        return None;
    }
    let mut target: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    loop {
        let mut scan = Scan {
            b: text.as_bytes(),
            i: 0,
            target: &target,
            path: Vec::new(),
            found: None,
        };
        scan.value();
        if let Some(at) = scan.found {
            return Some(line_col(text, at));
        }
        target.pop()?;
    }
}

const MAX_DEPTH: usize = 128;

fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..at.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, col)
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    target: &'a [String],
    path: Vec<String>,
    found: Option<usize>,
}

impl Scan<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    /// Scans one value; `false` when the text is broken here (scanning stops).
    fn value(&mut self) -> bool {
        self.ws();
        if self.found.is_some() {
            return false;
        }
        if self.path == self.target {
            self.found = Some(self.i);
            return false;
        }
        match self.b.get(self.i) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().is_some(),
            Some(_) => {
                while self.i < self.b.len() && !b",]} \t\r\n".contains(&self.b[self.i]) {
                    self.i += 1;
                }
                true
            }
            None => false,
        }
    }

    fn object(&mut self) -> bool {
        self.i += 1;
        loop {
            self.ws();
            match self.b.get(self.i) {
                Some(b'}') => {
                    self.i += 1;
                    return true;
                }
                Some(b',') => self.i += 1,
                Some(b'"') => {
                    let key_at = self.i;
                    let Some(key) = self.string() else {
                        return false;
                    };
                    self.path.push(key);
                    if self.path == self.target {
                        self.found = Some(key_at);
                        return false;
                    }
                    self.ws();
                    if self.b.get(self.i) != Some(&b':') {
                        return false;
                    }
                    self.i += 1;
                    if !self.value() {
                        return false;
                    }
                    self.path.pop();
                }
                _ => return false,
            }
        }
    }

    fn array(&mut self) -> bool {
        self.i += 1;
        let mut index = 0usize;
        loop {
            self.ws();
            match self.b.get(self.i) {
                Some(b']') => {
                    self.i += 1;
                    return true;
                }
                Some(b',') => {
                    self.i += 1;
                    index += 1;
                }
                Some(_) => {
                    self.path.push(index.to_string());
                    if !self.value() {
                        return false;
                    }
                    self.path.pop();
                }
                None => return false,
            }
        }
    }

    /// Scans a string; returns its decoded text.
    fn string(&mut self) -> Option<String> {
        let start = self.i;
        self.i += 1;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    let raw = std::str::from_utf8(&self.b[start..self.i]).ok()?;
                    return serde_json::from_str(raw).ok();
                }
                _ => self.i += 1,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::locate;

    #[test]
    fn pointers_land_on_their_line() {
        let text = "{\n  \"name\": \"x\",\n  \"actions\": [\n    {\"type\": \"respnd\"},\n    {\"a/b\": 1}\n  ]\n}";
        assert_eq!(locate(text, "/name"), Some((2, 3)));
        assert_eq!(locate(text, "/actions/0/type"), Some((4, 6)));
        assert_eq!(locate(text, "/actions/1/a~1b"), Some((5, 6)));
        // Absent: the nearest parent.
        assert_eq!(locate(text, "/actions/0/message"), Some((4, 5)));
        assert_eq!(locate(text, "/description"), Some((1, 1)));
        assert_eq!(locate("not json", "/x"), Some((1, 1)));
    }
}

//! The layers' rule (issue 20): host I/O lives in `crates/node`, API I/O in `crates/kube`, so a
//! check crate (`crates/check_*`) gathers through them and nowhere else. This reads the non-test
//! code of every check crate (the modules reachable from `lib.rs`/`main.rs`, `#[cfg(test)]` items
//! and files left out) and fails on `std::fs`, a `/proc` or `/sys` path, a `Path` method that asks
//! the filesystem, or an HTTP client or socket, in the code or in the crate's dependencies.

use e2e::workspace_root;
use std::path::{Path, PathBuf};

/// `Path` methods that read the filesystem (std::fs underneath).
const PATH_IO: [&str; 10] = [
    "exists",
    "try_exists",
    "is_dir",
    "is_file",
    "is_symlink",
    "metadata",
    "symlink_metadata",
    "read_link",
    "read_dir",
    "canonicalize",
];

/// HTTP clients and sockets: the API is reached through `kube`.
const NET: [&str; 7] = [
    "ureq",
    "reqwest",
    "hyper",
    "rustls",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
];

/// A token of Rust source with its line: comments dropped, literals kept as written, brackets
/// nested into groups. (A dozen lines of lexing instead of a parser dependency.)
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String, usize),
    /// `::` is one token; everything else one character.
    Punct(String, usize),
    /// A literal as written (`"…"`, `r#"…"#`, `b"…"`, `'c'`, `42`).
    Lit(String, usize),
    /// `(`, `[` or `{` and what they hold.
    Group(char, Vec<Tok>, usize),
}

impl Tok {
    fn line(&self) -> usize {
        match self {
            Tok::Ident(_, l) | Tok::Punct(_, l) | Tok::Lit(_, l) | Tok::Group(_, _, l) => *l,
        }
    }
}

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let c: Vec<char> = src.chars().collect();
    let mut line = 1;
    let mut i = 0;
    // Open groups: (delimiter, tokens so far, line); the bottom one is the file.
    let mut stack: Vec<(char, Vec<Tok>, usize)> = vec![(' ', Vec::new(), 1)];
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let ch = c[i];
        let start_line = line;
        // Reads a quoted literal from the opening quote at `j`; returns the index after it.
        let quoted = |mut j: usize, q: char, line: &mut usize| -> usize {
            j += 1;
            while j < c.len() && c[j] != q {
                if c[j] == '\\' {
                    j += 1;
                }
                if at(j) == '\n' {
                    *line += 1;
                }
                j += 1;
            }
            j + 1
        };
        let tok = if ch == '\n' {
            line += 1;
            i += 1;
            None
        } else if ch.is_whitespace() {
            i += 1;
            None
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
            None
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if i >= c.len() {
                    return Err(format!("line {start_line}: unterminated comment"));
                }
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            None
        } else if ch == '"' || (matches!(ch, 'b' | 'c') && at(i + 1) == '"') {
            let q = if ch == '"' { i } else { i + 1 };
            let end = quoted(q, '"', &mut line);
            let t = Tok::Lit(c[i..end.min(c.len())].iter().collect(), start_line);
            i = end;
            Some(t)
        } else if (ch == 'r' && matches!(at(i + 1), '"' | '#'))
            || (matches!(ch, 'b' | 'c') && at(i + 1) == 'r' && matches!(at(i + 2), '"' | '#'))
        {
            // A raw string, or a raw identifier (`r#type`).
            let mut j = if ch == 'r' { i + 1 } else { i + 2 };
            let hashes = c[j..].iter().take_while(|&&h| h == '#').count();
            j += hashes;
            if at(j) != '"' {
                // r#ident
                let k = j + c[j..].iter().take_while(|&&x| ident_char(x)).count();
                let t = Tok::Ident(c[j..k].iter().collect(), start_line);
                i = k;
                Some(t)
            } else {
                j += 1;
                loop {
                    if j >= c.len() {
                        return Err(format!("line {start_line}: unterminated raw string"));
                    }
                    if c[j] == '"'
                        && c[j + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|&&h| h == '#')
                            .count()
                            == hashes
                    {
                        j += 1 + hashes;
                        break;
                    }
                    if c[j] == '\n' {
                        line += 1;
                    }
                    j += 1;
                }
                let t = Tok::Lit(c[i..j].iter().collect(), start_line);
                i = j;
                Some(t)
            }
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            let q = if ch == '\'' { i } else { i + 1 };
            if at(q + 1) == '\\' || at(q + 2) == '\'' {
                let end = quoted(q, '\'', &mut line);
                let t = Tok::Lit(c[i..end.min(c.len())].iter().collect(), start_line);
                i = end;
                Some(t)
            } else {
                // A lifetime or label: nothing to look at.
                i = q + 1 + c[q + 1..].iter().take_while(|&&x| ident_char(x)).count();
                None
            }
        } else if ch.is_ascii_digit() {
            let mut j = i;
            while j < c.len() && (ident_char(c[j]) || (c[j] == '.' && at(j + 1).is_ascii_digit())) {
                j += 1;
            }
            let t = Tok::Lit(c[i..j].iter().collect(), start_line);
            i = j;
            Some(t)
        } else if ident_char(ch) {
            let j = i + c[i..].iter().take_while(|&&x| ident_char(x)).count();
            let t = Tok::Ident(c[i..j].iter().collect(), start_line);
            i = j;
            Some(t)
        } else if matches!(ch, '(' | '[' | '{') {
            stack.push((ch, Vec::new(), start_line));
            i += 1;
            None
        } else if matches!(ch, ')' | ']' | '}') {
            let (open, toks, l) = stack
                .pop()
                .filter(|_| !stack.is_empty())
                .ok_or(format!("line {start_line}: unbalanced {ch}"))?;
            if stack.is_empty() {
                return Err(format!("line {start_line}: unbalanced {ch}"));
            }
            i += 1;
            Some(Tok::Group(open, toks, l))
        } else if ch == ':' && at(i + 1) == ':' {
            i += 2;
            Some(Tok::Punct("::".into(), start_line))
        } else {
            i += 1;
            Some(Tok::Punct(ch.to_string(), start_line))
        };
        if let Some(t) = tok {
            stack.last_mut().expect("the file").1.push(t);
        }
    }
    if stack.len() != 1 {
        return Err(format!("unclosed {:?}", stack.last().map(|s| s.0)));
    }
    Ok(stack.pop().expect("the file").1)
}

/// One place that breaks the rule.
#[derive(Debug, Clone, PartialEq)]
struct Hit {
    line: usize,
    what: String,
}

/// The walk over one file's tokens: what breaks the rule, and the file modules it declares
/// outside `#[cfg(test)]` (as paths relative to the file's module directory).
#[derive(Default)]
struct Scan {
    hits: Vec<Hit>,
    modules: Vec<PathBuf>,
    /// The whole file is `#![cfg(test)]`.
    test_only: bool,
}

fn is_punct(t: Option<&Tok>, p: &str) -> bool {
    matches!(t, Some(Tok::Punct(x, _)) if x == p)
}

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(i, _)) => Some(i),
        _ => None,
    }
}

/// Every identifier inside a token sequence, nested groups included.
fn idents(ts: &[Tok], out: &mut Vec<String>) {
    for t in ts {
        match t {
            Tok::Ident(i, _) => out.push(i.clone()),
            Tok::Group(_, inner, _) => idents(inner, out),
            _ => {}
        }
    }
}

/// An attribute's kind: `#[doc ...]`, `#[cfg(...test...)]` without `not` (test-only), other.
enum Attr {
    Doc,
    Test,
    Other,
}

fn attr_kind(inside: &[Tok]) -> Attr {
    match ident(inside.first()) {
        Some("doc") => Attr::Doc,
        Some("cfg") => {
            let mut words = Vec::new();
            idents(inside, &mut words);
            if words.iter().any(|w| w == "test") && !words.iter().any(|w| w == "not") {
                Attr::Test
            } else {
                Attr::Other
            }
        }
        _ => Attr::Other,
    }
}

/// The text of a string literal token (`"…"`, `r#"…"#`, `b"…"`), escapes left as written.
fn literal_text(lit: &str) -> Option<&str> {
    let s = lit
        .trim_start_matches('b')
        .trim_start_matches('c')
        .trim_start_matches('r');
    let s = s.trim_matches('#');
    s.strip_prefix('"').and_then(|s| s.strip_suffix('"'))
}

/// A `/proc` or `/sys` path in a string: at its start, or right after a format placeholder
/// (`"{root}/proc/1/mountinfo"`). Prose that mentions one mid-sentence is not a path.
fn host_path(text: &str) -> Option<&'static str> {
    for (word, name) in [("/proc", "a /proc path"), ("/sys", "a /sys path")] {
        let mut at = 0;
        while let Some(i) = text[at..].find(word).map(|i| i + at) {
            let before_ok = i == 0 || text[..i].ends_with('}');
            let after = &text[i + word.len()..];
            let after_ok = after.is_empty() || after.starts_with('/');
            if before_ok && after_ok {
                return Some(name);
            }
            at = i + word.len();
        }
    }
    None
}

impl Scan {
    fn hit(&mut self, t: &Tok, what: impl Into<String>) {
        self.hits.push(Hit {
            line: t.line(),
            what: what.into(),
        });
    }

    /// Walk a token sequence; `dir` is where `mod x;` declared here finds `x.rs`.
    fn walk(&mut self, ts: &[Tok], dir: &Path, top: bool) {
        let mut i = 0;
        let mut test_item = false;
        while i < ts.len() {
            let t = &ts[i];
            // Attributes: `#[...]` and `#![...]`.
            if is_punct(Some(t), "#") {
                let inner = is_punct(ts.get(i + 1), "!");
                if let Some(Tok::Group('[', inside, _)) = ts.get(i + 1 + inner as usize) {
                    match attr_kind(inside) {
                        Attr::Doc => {}
                        Attr::Test if inner && top => self.test_only = true,
                        Attr::Test => test_item = true,
                        Attr::Other => self.walk(inside, dir, false),
                    }
                    i += 2 + inner as usize;
                    continue;
                }
            }
            if test_item {
                // Skip the item: up to its `;`, or its braces (and a `;` after them).
                while i < ts.len() {
                    match &ts[i] {
                        Tok::Punct(p, _) if p == ";" => {
                            i += 1;
                            break;
                        }
                        Tok::Group('{', _, _) => {
                            i += 1;
                            if is_punct(ts.get(i), ";") {
                                i += 1;
                            }
                            break;
                        }
                        _ => i += 1,
                    }
                }
                test_item = false;
                continue;
            }
            match t {
                Tok::Ident(id, _) if id == "mod" => {
                    if let Some(name) = ident(ts.get(i + 1)) {
                        match ts.get(i + 2) {
                            Some(Tok::Punct(p, _)) if p == ";" => {
                                self.modules.push(dir.join(name));
                                i += 3;
                                continue;
                            }
                            Some(Tok::Group('{', inside, _)) => {
                                self.walk(inside, &dir.join(name), false);
                                i += 3;
                                continue;
                            }
                            _ => {}
                        }
                    }
                }
                Tok::Ident(id, _) if id == "std" => self.std_path(ts, i),
                Tok::Ident(id, _) if NET.contains(&id.as_str()) => {
                    self.hit(t, format!("{id} (HTTP/sockets belong in kube)"))
                }
                Tok::Punct(p, _) if p == "." => {
                    if let (Some(m), Some(Tok::Group('(', _, _))) =
                        (ident(ts.get(i + 1)), ts.get(i + 2))
                    {
                        if PATH_IO.contains(&m) {
                            let what = format!(".{m}() (filesystem access belongs in node)");
                            self.hit(&ts[i + 1], what);
                        }
                    }
                }
                Tok::Lit(s, _) => {
                    if let Some(what) = literal_text(s).and_then(host_path) {
                        self.hit(t, format!("{what} {s} (host paths belong in node)"));
                    }
                }
                Tok::Group(_, inside, _) => self.walk(inside, dir, false),
                _ => {}
            }
            i += 1;
        }
    }

    /// A path starting with `std` at `i`: `std::fs…`, `std::os::unix::fs…`, `std::{fs, …}`.
    fn std_path(&mut self, ts: &[Tok], i: usize) {
        let mut j = i + 1;
        while is_punct(ts.get(j), "::") {
            match ts.get(j + 1) {
                Some(Tok::Ident(seg, _)) if seg == "fs" => {
                    self.hit(&ts[i], "std::fs (filesystem access belongs in node)");
                    return;
                }
                Some(Tok::Ident(_, _)) => j += 2,
                Some(Tok::Group('{', inside, _)) => {
                    let mut words = Vec::new();
                    idents(inside, &mut words);
                    if words.iter().any(|w| w == "fs") {
                        self.hit(&ts[i], "std::fs (filesystem access belongs in node)");
                    }
                    return;
                }
                _ => return,
            }
        }
    }
}

/// Scan one source text; `dir` is the module directory of its `mod x;` declarations.
fn scan_source(src: &str, dir: &Path) -> Result<Scan, String> {
    let ts = lex(src)?;
    let mut s = Scan::default();
    s.walk(&ts, dir, true);
    Ok(s)
}

/// Every rule-breaking place of a check crate: `file:line: what`.
fn crate_offenders(krate: &Path) -> Vec<String> {
    let src = krate.join("src");
    let mut out = Vec::new();
    let mut todo: Vec<(PathBuf, PathBuf)> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| (src.join(f), src.clone()))
        .filter(|(f, _)| f.exists())
        .collect();
    let mut seen = Vec::new();
    while let Some((file, dir)) = todo.pop() {
        if seen.contains(&file) {
            continue;
        }
        seen.push(file.clone());
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let s = scan_source(&text, &dir)
            .unwrap_or_else(|e| panic!("{} does not lex: {e}", file.display()));
        if s.test_only {
            continue;
        }
        let rel = file
            .strip_prefix(workspace_root())
            .unwrap_or(&file)
            .to_path_buf();
        out.extend(
            s.hits
                .iter()
                .map(|h| format!("{}:{}: {}", rel.display(), h.line, h.what)),
        );
        for m in s.modules {
            let name = m.file_name().unwrap().to_string_lossy().into_owned();
            let parent = m.parent().unwrap().to_path_buf();
            let flat = parent.join(format!("{name}.rs"));
            let nested = m.join("mod.rs");
            if flat.exists() {
                todo.push((flat, m.clone()));
            } else if nested.exists() {
                todo.push((nested, m.clone()));
            } else {
                out.push(format!(
                    "{}: mod {name}; has no file (looked for {} and {})",
                    rel.display(),
                    flat.display(),
                    nested.display()
                ));
            }
        }
    }
    // Dependencies: an HTTP client or TLS stack of its own.
    let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
    for (n, l) in manifest.lines().enumerate() {
        let dep = l.split(['=', '.', ' ']).next().unwrap_or("").trim();
        if NET.contains(&dep) {
            out.push(format!(
                "{}/Cargo.toml:{}: depends on {dep} (HTTP belongs in kube)",
                krate.file_name().unwrap().to_string_lossy(),
                n + 1
            ));
        }
    }
    out
}

fn check_crates() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(workspace_root().join("crates"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("check_"))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

#[test]
fn check_crates_read_the_host_only_through_node_and_the_api_only_through_kube() {
    let crates = check_crates();
    assert!(crates.len() >= 9, "{crates:?}");
    let offenders: Vec<String> = crates.iter().flat_map(|c| crate_offenders(c)).collect();
    assert!(
        offenders.is_empty(),
        "host or API I/O in a check crate outside node/kube ({}):\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

/// The scanner itself, on planted lines: each kind of access is caught with its line, the same
/// lines under `#[cfg(test)]` (an item, a module, a whole file) and in doc comments are not.
#[test]
fn the_layer_scan_catches_planted_lines_and_spares_test_code() {
    let planted = r##"
//! Reads /proc/self/mountinfo (prose in a doc comment is no access).
use std::fs;
use std::{io, fs::File};
use std::os::unix::fs::MetadataExt;
/// Not "/proc/x" either.
fn a(root: &str) -> String {
    let _ = std::fs::read("x");
    let _ = std::path::Path::new("x").exists();
    let _ = p.read_link();
    let _ = format!("{root}/proc/1/mountinfo");
    let _ = "/sys/class/iscsi_session";
    let _ = std::net::TcpStream::connect("127.0.0.1:1");
    let _ = ureq::get("http://x");
    let _ = "see /proc in the README";
    let _ = "/procedure";
    let _ = pod.metadata;
    let _ = ('"', "/sys/block", r#"/proc/"raw""#, b'\'', "\"/proc");
    fn l<'a>(x: &'a str) -> &'a str { x }
    String::new()
}
mod gather;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod inline {
    fn b() { let _ = std::fs::read("/proc/self/stat"); }
}
#[cfg(test)]
fn c() { let _ = Path::new("/sys").exists(); }
#[cfg(not(test))]
fn d() { let _ = std::fs::read("y"); }
"##;
    let s = scan_source(planted, Path::new("src")).unwrap();
    let got: Vec<(usize, &str)> = s
        .hits
        .iter()
        .map(|h| (h.line, h.what.split(' ').next().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            (3, "std::fs"),
            (4, "std::fs"),
            (5, "std::fs"),
            (8, "std::fs"),
            (9, ".exists()"),
            (10, ".read_link()"),
            (11, "a"),
            (12, "a"),
            (13, "TcpStream"),
            (14, "ureq"),
            (18, "a"),
            (18, "a"),
            (32, "std::fs"),
        ],
        "{:#?}",
        s.hits
    );
    assert_eq!(s.modules, [PathBuf::from("src/gather")]);
    assert!(!s.test_only);
    let whole = scan_source("#![cfg(test)]\nuse std::fs;\n", Path::new("src")).unwrap();
    assert!(whole.test_only);
}

/// The crates that may hold `unsafe` (the system-call and signal layer); each of their `unsafe`
/// says why it is sound in a `SAFETY:` comment.
const UNSAFE_CRATES: [&str; 3] = ["node", "plugin", "textfile"];

/// Each `unsafe` block, fn or impl in `src` (outside comments) without a `SAFETY:` comment on its
/// line or in the four lines before it: `(line number, line)`.
fn unsafe_without_safety(src: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let code = l.split("//").next().unwrap_or("");
        let is_unsafe = [
            "unsafe {",
            "unsafe{",
            "unsafe fn",
            "unsafe impl",
            "unsafe extern",
        ]
        .iter()
        .any(|k| code.contains(k));
        if is_unsafe
            && !lines[i.saturating_sub(4)..=i]
                .iter()
                .any(|p| p.contains("SAFETY:"))
        {
            out.push((i + 1, l.trim().to_string()));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Issue 35: a crate with no business in `unsafe` says so to the compiler
/// (`#![forbid(unsafe_code)]` at its root), and the three that need it justify every use.
#[test]
fn unsafe_lives_in_three_crates_and_says_why_each_time() {
    let mut missing = Vec::new();
    let mut unjustified = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(workspace_root().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    crates.sort();
    assert!(crates.len() >= 14, "{crates:?}");
    for c in &crates {
        let name = c.file_name().unwrap().to_string_lossy().to_string();
        if UNSAFE_CRATES.contains(&name.as_str()) {
            let mut files = Vec::new();
            rust_files(&c.join("src"), &mut files);
            for f in files {
                let src = std::fs::read_to_string(&f).unwrap();
                for (n, l) in unsafe_without_safety(&src) {
                    unjustified.push(format!("{}:{n}: {l}", f.display()));
                }
            }
            continue;
        }
        for root in ["src/lib.rs", "src/main.rs"] {
            let f = c.join(root);
            if f.exists()
                && !std::fs::read_to_string(&f)
                    .unwrap()
                    .contains("#![forbid(unsafe_code)]")
            {
                missing.push(f.display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "crate roots without #![forbid(unsafe_code)] (only {UNSAFE_CRATES:?} may use unsafe):\n{}",
        missing.join("\n")
    );
    assert!(
        unjustified.is_empty(),
        "unsafe without a SAFETY: comment:\n{}",
        unjustified.join("\n")
    );
}

/// The SAFETY scan on planted lines: a bare `unsafe` block is caught, one with its reason just
/// above is not, and prose about unsafe in a comment is not code.
#[test]
fn the_safety_scan_catches_a_bare_unsafe() {
    let src = "fn a() {\n    // SAFETY: the fd is ours.\n    unsafe { close(3) };\n}\n\
               // calling unsafe { x } here is prose\n\
               fn b() {\n    let x = 1;\n    let y = 2;\n    let z = 3;\n    let w = 4;\n    unsafe { close(4) };\n}\n";
    let found = unsafe_without_safety(src);
    assert_eq!(
        found,
        vec![(11, "unsafe { close(4) };".to_string())],
        "{found:?}"
    );
}

/// The module a source file is, inside its crate: `src/lib.rs` → "", `src/a.rs` → "a",
/// `src/a/b.rs` and `src/a/b/mod.rs` → "a::b".
fn module_of(src_dir: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src_dir).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// The code of a file without its trailing `#[cfg(test)] mod …` (tests may reach anywhere) and
/// without comments (a doc link to ``[`crate::usage`]`` imports nothing).
fn non_test_code(src: &str) -> String {
    let mut at = 0;
    let mut code = src;
    for l in src.split_inclusive('\n') {
        if l.trim() == "#[cfg(test)]" && src[at + l.len()..].trim_start().starts_with("mod ") {
            code = &src[..at];
            break;
        }
        at += l.len();
    }
    code.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The crate modules a file's code names (`crate::a::…`, `use crate::{a, b::c}`, `super::x`),
/// resolved to the modules that exist (`a::b` when it is a file, else `a`); the crate root and
/// the file's own module are left out.
fn modules_named(code: &str, me: &str, modules: &[String]) -> std::collections::BTreeSet<String> {
    let mut paths: Vec<String> = Vec::new();
    let parent = me.rsplit_once("::").map_or("", |(p, _)| p).to_string();
    let bytes = code.as_bytes();
    for (key, base) in [("crate::", String::new()), ("super::", parent)] {
        let mut i = 0;
        while let Some(off) = code[i..].find(key) {
            let start = i + off + key.len();
            i = start;
            // Not the tail of another path (`foo_crate::`).
            let before = (i - key.len()).checked_sub(1).map(|b| bytes[b]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
                continue;
            }
            let prefix = if base.is_empty() {
                String::new()
            } else {
                format!("{base}::")
            };
            if code[start..].starts_with('{') {
                // A use group: its top-level entries.
                let mut depth = 0;
                let mut entry = String::new();
                for ch in code[start + 1..].chars() {
                    match ch {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            paths.push(format!("{prefix}{}", entry.trim()));
                            entry.clear();
                            continue;
                        }
                        _ => {}
                    }
                    entry.push(ch);
                }
                paths.push(format!("{prefix}{}", entry.trim()));
            } else {
                let p: String = code[start..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                paths.push(format!("{prefix}{p}"));
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    for p in paths {
        let segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
        // The longest prefix of the path that is a module file.
        for n in (1..=segs.len()).rev() {
            let m = segs[..n].join("::");
            if modules.contains(&m) {
                if m != me {
                    out.insert(m);
                }
                break;
            }
        }
    }
    out
}

/// A cycle in `edges` (module → modules it names), as the modules along it, if there is one.
fn find_cycle(
    edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        state: &mut std::collections::BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = std::collections::BTreeMap::new();
    for n in edges.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(n, edges, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

/// The import graph of one crate's files (tests and the crate root left out).
fn crate_imports(
    src_dir: &Path,
    files: &[(PathBuf, String)],
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let modules: Vec<String> = files.iter().map(|(f, _)| module_of(src_dir, f)).collect();
    let mut edges = std::collections::BTreeMap::new();
    for (f, src) in files {
        let me = module_of(src_dir, f);
        if me.is_empty() || me == "tests" || me.ends_with("::tests") {
            continue;
        }
        let named: std::collections::BTreeSet<String> =
            modules_named(&non_test_code(src), &me, &modules)
                .into_iter()
                .filter(|m| m != "tests" && !m.ends_with("::tests"))
                .collect();
        edges.insert(me, named);
    }
    edges
}

/// Issue 35: within each crate, no two files import each other, directly or round a loop (a
/// type both sides need has a home of its own: `identity.rs`, `volume.rs`, `capped.rs`, …).
#[test]
fn no_crate_has_an_import_circle_among_its_files() {
    let mut circles = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(workspace_root().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    for src_dir in &crates {
        let mut paths = Vec::new();
        rust_files(src_dir, &mut paths);
        let files: Vec<(PathBuf, String)> = paths
            .into_iter()
            .map(|p| {
                let s = std::fs::read_to_string(&p).unwrap();
                (p, s)
            })
            .collect();
        if let Some(c) = find_cycle(&crate_imports(src_dir, &files)) {
            circles.push(format!("{}: {}", src_dir.display(), c.join(" → ")));
        }
    }
    assert!(
        circles.is_empty(),
        "files that import each other:\n{}",
        circles.join("\n")
    );
}

/// The circle finder on a planted crate: the `evaluate ↔ text` circle this repository had is
/// found; a `use` group, a `super::` path and a test module do not hide or invent one.
#[test]
fn the_circle_finder_catches_a_planted_circle() {
    let src = Path::new("/x/src");
    let file = |p: &str, s: &str| (src.join(p), s.to_string());
    let circle = [
        file(
            "lib.rs",
            "mod evaluate;\nmod text;\npub use evaluate::evaluate;\n",
        ),
        file(
            "evaluate.rs",
            "use crate::{text::{self, headline}, Data};\n",
        ),
        file("text.rs", "use crate::evaluate::Identity;\n"),
    ];
    let c = find_cycle(&crate_imports(src, &circle)).expect("the planted circle");
    assert!(
        c.contains(&"evaluate".to_string()) && c.contains(&"text".to_string()),
        "{c:?}"
    );
    let nested = [
        file("runtime.rs", "mod worker;\nuse crate::privilege::gate;\n"),
        file(
            "runtime/worker.rs",
            "use super::*;\nfn f() { crate::parent::set(1) }\n",
        ),
        file("privilege.rs", "fn g() { crate::parent::die() }\n"),
        file(
            "parent.rs",
            "use crate::Status;\n/// See [`crate::privilege`].\n",
        ),
    ];
    assert_eq!(find_cycle(&crate_imports(src, &nested)), None);
    let back = [
        file("runtime.rs", "mod worker;\n"),
        file("runtime/worker.rs", "use super::*;\n"),
        file("privilege.rs", "fn g() { crate::runtime::worker::die() }\n#[cfg(test)]\nmod t { use crate::privilege::x; }\n"),
        file("parent.rs", "fn h() { crate::privilege::g() }\n#[cfg(test)]\nmod tests { use crate::runtime::x; }\n"),
    ];
    // runtime::worker → runtime (super) is a child naming its parent, not a circle by itself…
    assert_eq!(find_cycle(&crate_imports(src, &back)), None);
    // …but a parent that names what names it back is.
    let mut looped = back.to_vec();
    looped[0] = file("runtime.rs", "mod worker;\nuse crate::parent::h;\n");
    looped[3] = file("parent.rs", "fn h() { crate::runtime::worker::die() }\n");
    let c = find_cycle(&crate_imports(src, &looped))
        .expect("runtime::worker → runtime → parent → runtime::worker");
    assert!(c.contains(&"parent".to_string()), "{c:?}");
}

/// libc functions `nix` 0.30 wraps, and the wrapper to call instead (issue 35: a raw `libc::`
/// call is an `unsafe` block, a hand-checked return value and errno, and a raw descriptor where
/// nix has a checked, typed one). Calls nix lacks stay raw, each with its `SAFETY:` comment:
/// `_exit`, `getauxval`, `getrandom`, `localtime_r`, and `syscall` for `pidfd_open`, `capget`,
/// `capset`.
const NIX_WRAPS: [(&str, &str); 76] = [
    ("fork", "nix::unistd::fork"),
    ("pipe", "nix::unistd::pipe"),
    ("pipe2", "nix::unistd::pipe2"),
    ("poll", "nix::poll::poll"),
    ("ppoll", "nix::poll::ppoll"),
    ("read", "nix::unistd::read"),
    ("write", "nix::unistd::write"),
    ("pread", "nix::sys::uio::pread"),
    ("pwrite", "nix::sys::uio::pwrite"),
    ("close", "an OwnedFd (dropped) or nix::unistd::close"),
    ("lseek", "nix::unistd::lseek"),
    ("open", "nix::fcntl::open"),
    ("openat", "nix::fcntl::openat"),
    ("fcntl", "nix::fcntl::fcntl"),
    ("flock", "nix::fcntl::Flock"),
    ("rename", "std::fs::rename or nix::fcntl::renameat"),
    ("renameat", "nix::fcntl::renameat"),
    ("renameat2", "nix::fcntl::renameat2"),
    ("readlink", "nix::fcntl::readlink"),
    ("readlinkat", "nix::fcntl::readlinkat"),
    ("unlink", "nix::unistd::unlink"),
    ("unlinkat", "nix::unistd::unlinkat"),
    ("mkdir", "nix::unistd::mkdir"),
    ("mkdirat", "nix::sys::stat::mkdirat"),
    ("mkfifo", "nix::unistd::mkfifo"),
    ("stat", "nix::sys::stat::stat"),
    ("lstat", "nix::sys::stat::lstat"),
    ("fstat", "nix::sys::stat::fstat"),
    ("fstatat", "nix::sys::stat::fstatat"),
    ("umask", "nix::sys::stat::umask"),
    ("fsync", "nix::unistd::fsync"),
    ("fdatasync", "nix::unistd::fdatasync"),
    ("ftruncate", "nix::unistd::ftruncate"),
    ("chown", "nix::unistd::chown"),
    (
        "lchown",
        "nix::unistd::fchownat(.., AtFlags::AT_SYMLINK_NOFOLLOW)",
    ),
    ("fchownat", "nix::unistd::fchownat"),
    ("access", "nix::unistd::access"),
    ("faccessat", "nix::unistd::faccessat"),
    ("chdir", "nix::unistd::chdir"),
    ("dup", "nix::unistd::dup"),
    (
        "dup2",
        "nix::unistd::dup2 (dup2_stdin, dup2_stdout, dup2_stderr)",
    ),
    ("dup3", "nix::unistd::dup3"),
    ("execv", "nix::unistd::execv"),
    ("execve", "nix::unistd::execve"),
    ("execvp", "nix::unistd::execvp"),
    ("waitpid", "nix::sys::wait::waitpid"),
    ("waitid", "nix::sys::wait::waitid"),
    ("kill", "nix::sys::signal::kill"),
    ("killpg", "nix::sys::signal::killpg"),
    ("sigaction", "nix::sys::signal::sigaction"),
    ("signal", "nix::sys::signal::signal"),
    ("sigprocmask", "nix::sys::signal::sigprocmask"),
    ("pthread_sigmask", "nix::sys::signal::pthread_sigmask"),
    ("getpid", "nix::unistd::getpid"),
    ("getppid", "nix::unistd::getppid"),
    ("getuid", "nix::unistd::getuid"),
    ("geteuid", "nix::unistd::geteuid"),
    ("getgid", "nix::unistd::getgid"),
    ("getegid", "nix::unistd::getegid"),
    ("getgroups", "nix::unistd::getgroups"),
    ("setgroups", "nix::unistd::setgroups"),
    ("setuid", "nix::unistd::setuid"),
    ("setgid", "nix::unistd::setgid"),
    ("setfsuid", "nix::unistd::setfsuid"),
    ("setfsgid", "nix::unistd::setfsgid"),
    ("setsid", "nix::unistd::setsid"),
    ("setpgid", "nix::unistd::setpgid"),
    ("prctl", "nix::sys::prctl (set_pdeathsig, get_pdeathsig, …)"),
    ("statfs", "nix::sys::statfs::statfs"),
    ("statvfs", "nix::sys::statvfs::statvfs"),
    ("uname", "nix::sys::utsname::uname"),
    ("gethostname", "nix::unistd::gethostname"),
    ("clock_gettime", "nix::time::clock_gettime"),
    ("mmap", "nix::sys::mman::mmap"),
    ("munmap", "nix::sys::mman::munmap"),
    ("madvise", "nix::sys::mman::madvise"),
];

/// Each raw call of a function nix wraps in `src` (comments and strings are not code):
/// `(line, "libc::NAME(", nix replacement)`. `libc::syscall(libc::SYS_NAME, …)` counts as a call
/// of NAME.
fn raw_libc_calls(src: &str) -> Result<Vec<(usize, String, &'static str)>, String> {
    fn walk(ts: &[Tok], out: &mut Vec<(usize, String, &'static str)>) {
        for (i, t) in ts.iter().enumerate() {
            if let Tok::Group(_, inner, _) = t {
                walk(inner, out);
            }
            if ident(Some(t)) != Some("libc") || !is_punct(ts.get(i + 1), "::") {
                continue;
            }
            let Some(name) = ident(ts.get(i + 2)) else {
                continue;
            };
            let Some(Tok::Group('(', args, _)) = ts.get(i + 3) else {
                continue;
            };
            // `libc::syscall(libc::SYS_fork, …)`: the call behind the number.
            let called = if name == "syscall" {
                match (
                    ident(args.first()),
                    is_punct(args.get(1), "::"),
                    ident(args.get(2)),
                ) {
                    (Some("libc"), true, Some(sys)) => sys.strip_prefix("SYS_").unwrap_or(sys),
                    _ => name,
                }
            } else {
                name
            };
            if let Some((_, nix)) = NIX_WRAPS.iter().find(|(f, _)| *f == called) {
                let shown = if called == name {
                    format!("libc::{name}(")
                } else {
                    format!("libc::syscall(libc::SYS_{called}")
                };
                out.push((t.line(), shown, nix));
            }
        }
    }
    let mut out = Vec::new();
    walk(&lex(src)?, &mut out);
    Ok(out)
}

/// Issue 35: no raw `libc::` call where `nix` has the function, in any file under `crates/`
/// (test code included).
#[test]
fn no_raw_libc_call_where_nix_has_the_function() {
    let mut files = Vec::new();
    rust_files(&workspace_root().join("crates"), &mut files);
    files.sort();
    assert!(files.len() > 50, "{} files", files.len());
    let mut raw = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(workspace_root()).unwrap_or(f);
        match raw_libc_calls(&src) {
            Ok(calls) => {
                for (line, call, nix) in calls {
                    raw.push(format!("{}:{line}: {call} — use {nix}", rel.display()));
                }
            }
            Err(e) => raw.push(format!("{}: cannot lex: {e}", rel.display())),
        }
    }
    assert!(
        raw.is_empty(),
        "raw libc calls nix wraps (call the nix function instead; see the list in tests/tests/layers.rs):\n{}",
        raw.join("\n")
    );
}

/// The raw-call scan on planted lines: direct calls, `nix::libc::` calls, a wrapped call by
/// syscall number and a call nested in arguments are caught; comments, strings, calls nix lacks
/// and `libc::` types and constants are not.
#[test]
fn the_raw_libc_scan_catches_planted_calls() {
    let src = r#"
fn a() {
    // SAFETY: none
    let pid = unsafe { libc::fork() };
    let st: libc::stat = unsafe { std::mem::zeroed() };
    let n = unsafe { nix::libc::waitpid(pid, &mut 0, libc::WNOHANG) };
    unsafe { libc::syscall(libc::SYS_setfsuid, 65534) };
    unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let s = "libc::kill(1, 9)"; // libc::kill(pid, libc::SIGKILL)
    unsafe { libc::_exit(f(libc::getuid())) }
}
"#;
    let found: Vec<(usize, String)> = raw_libc_calls(src)
        .unwrap()
        .into_iter()
        .map(|(l, c, _)| (l, c))
        .collect();
    assert_eq!(
        found,
        vec![
            (4, "libc::fork(".to_string()),
            (6, "libc::waitpid(".to_string()),
            (7, "libc::syscall(libc::SYS_setfsuid".to_string()),
            (10, "libc::getuid(".to_string()),
        ],
        "{found:?}"
    );
}

/// Issue 35: the lint policy lives in one place, the root `Cargo.toml`'s
/// `[workspace.lints.clippy]` (pedantic on, each allowed lint with its reason), and every crate
/// takes it: a crate without `[lints] workspace = true` would silently lint by other rules.
#[test]
fn every_crate_takes_the_workspace_lints() {
    let root = workspace_root();
    let top = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let table = top
        .split("[workspace.lints.clippy]")
        .nth(1)
        .expect("[workspace.lints.clippy] in the root Cargo.toml");
    let table = table.split("\n[").next().unwrap_or(table);
    assert!(
        table.contains("pedantic = { level = \"warn\", priority = -1 }"),
        "{table}"
    );
    for line in table.lines().filter(|l| l.contains("= \"allow\"")) {
        assert!(
            line.split_once('#')
                .is_some_and(|(_, why)| why.trim().len() >= 10),
            "an allowed lint without its reason (a `# …` comment on its line): {line}"
        );
    }
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("Cargo.toml"))
        .filter(|p| p.exists())
        .collect();
    manifests.push(root.join("tests/Cargo.toml"));
    let missing: Vec<String> = manifests
        .iter()
        .filter(|m| {
            let s = std::fs::read_to_string(m).unwrap();
            !s.split("\n[lints]")
                .nth(1)
                .is_some_and(|rest| rest.trim_start().starts_with("workspace = true"))
        })
        .map(|m| m.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "crates without `[lints] workspace = true` (the lint policy of the root Cargo.toml):\n{}",
        missing.join("\n")
    );
}

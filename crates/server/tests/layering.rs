//! Keeps each crate's module layering as ARCHITECTURE.md (`## Layers`) draws it.
//!
//! Every table there, between `<!-- layers: <dir> -->` and `<!-- /layers -->`,
//! lists a crate's top-level modules from layer 0 up. A module may use modules of
//! lower layers, its own layer's only where the table says `yes` (and never in
//! a circle), never a higher one; items of the crate root (`crate::Name`,
//! `Name` not a module) are free.
//! Every module in the dir must be listed once and every listed one must exist,
//! so a new file forces a decision. A second rule: the handler files of
//! `crates/server/src/methods/` never name each other (`mod.rs` may).
//!
//! The scan is a small tokenizer, not a parser: comments, literals and
//! `#[cfg(test)]` items are dropped, then every path starting with `crate::`,
//! `super::` or `self::` (use trees expanded) is resolved to an absolute module
//! path. It only reads files; nothing of the server crate is used.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module directories whose files are peers that never import each other:
/// (crate source dir, module). Its `mod.rs` is the table of them and may.
const HANDLER_DIRS: &[(&str, &str)] = &[("crates/server/src", "methods")];

/// One crate's table: its source dir, and per layer its modules and whether
/// they may import each other.
struct Table {
    dir: String,
    layers: Vec<(Vec<String>, bool)>,
}

fn parse_tables(markdown: &str) -> Vec<Table> {
    let (mut tables, mut open) = (Vec::new(), None::<Table>);
    for line in markdown.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("<!-- layers:") {
            let dir = rest.trim_end_matches("-->").trim().to_string();
            open = Some(Table {
                dir,
                layers: Vec::new(),
            });
        } else if line == "<!-- /layers -->" {
            tables.push(open.take().expect("`<!-- /layers -->` without its opening"));
        } else if let Some(table) = open.as_mut().filter(|_| line.starts_with('|')) {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let [layer, modules, within] = cells[..] else {
                panic!(
                    "{}: a row is `| <n> name | modules | yes/no |`: {line}",
                    table.dir
                )
            };
            if layer == "layer" || layer.starts_with("---") {
                continue;
            }
            let n = layer.split(' ').next().and_then(|n| n.parse().ok());
            assert_eq!(
                n,
                Some(table.layers.len()),
                "{}: numbering: {line}",
                table.dir
            );
            assert!(
                matches!(within, "yes" | "no"),
                "{}: yes or no? {line}",
                table.dir
            );
            let modules = modules.split(',').map(|m| m.trim_matches([' ', '`']));
            let modules = modules
                .filter(|m| !m.is_empty())
                .map(String::from)
                .collect();
            table.layers.push((modules, within == "yes"));
        }
    }
    assert!(open.is_none(), "a `<!-- layers: -->` table is never closed");
    tables
}

/// A token (an identifier or keyword, `::`, or one punctuation char) and its line.
type Tok = (String, usize);

/// Identifiers, keywords, `::` and single punctuation chars, each with its
/// line. Whitespace, comments and literals are dropped.
fn tokenize(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let char_at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let ident = |i: usize| char_at(i).is_alphanumeric() || char_at(i) == '_';
    let find = |from: usize, hit: &dyn Fn(usize) -> bool| (from..c.len()).find(|&j| hit(j));
    let (mut toks, mut i, mut line) = (Vec::new(), 0, 1);
    while i < c.len() {
        let mut token = None;
        let end = match (c[i], char_at(i + 1)) {
            ('/', '/') => find(i, &|j| c[j] == '\n').unwrap_or(c.len()),
            ('/', '*') => {
                let (mut j, mut depth) = (i + 2, 1);
                while j < c.len() && depth > 0 {
                    match (c[j], char_at(j + 1)) {
                        ('/', '*') => (depth, j) = (depth + 1, j + 2),
                        ('*', '/') => (depth, j) = (depth - 1, j + 2),
                        _ => j += 1,
                    }
                }
                j
            }
            ('"', _) => {
                let mut j = i + 1;
                while j < c.len() && c[j] != '"' {
                    j += if c[j] == '\\' { 2 } else { 1 };
                }
                j + 1
            }
            ('\'', '\\') => find(i + 3, &|j| c[j] == '\'').map_or(c.len(), |j| j + 1),
            ('\'', _) if char_at(i + 2) == '\'' => i + 3, // a char; else a lifetime's quote
            (':', ':') => {
                token = Some("::".to_string());
                i + 2
            }
            _ if ident(i) => {
                let end = find(i, &|j| !ident(j)).unwrap_or(c.len());
                let word: String = c[i..end].iter().collect();
                let hashes = find(end, &|j| c[j] != '#').unwrap_or(c.len()) - end;
                if matches!(word.as_str(), "r" | "br" | "cr") && char_at(end + hashes) == '"' {
                    let closed =
                        |j: usize| c[j] == '"' && (1..=hashes).all(|k| char_at(j + k) == '#');
                    find(end + hashes + 1, &closed).map_or(c.len(), |j| j + 1 + hashes)
                } else {
                    token = Some(word);
                    end
                }
            }
            (ch, _) if ch.is_whitespace() || ch == '\'' => i + 1,
            (ch, _) => {
                token = Some(ch.to_string());
                i + 1
            }
        };
        let end = end.min(c.len());
        toks.extend(token.map(|t| (t, line)));
        line += c[i..end].iter().filter(|&&ch| ch == '\n').count();
        i = end;
    }
    toks
}

/// The text of token `i`, or "" past the end.
fn at(toks: &[Tok], i: usize) -> &str {
    toks.get(i).map_or("", |t| t.0.as_str())
}

/// A module path from the crate root: `crate::a::b` → `[a, b]`.
type ModPath = Vec<String>;

/// Every `crate::`/`super::`/`self::` path in the non-test code of a file whose
/// module is `module` (`src/a/b.rs` → `[a, b]`), resolved from the crate root,
/// with its line; and the module paths of the file's out-of-line
/// `#[cfg(test)] mod x;` (files of test code).
fn references(src: &str, module: &[String]) -> (Vec<(ModPath, usize)>, Vec<ModPath>) {
    let toks = tokenize(src);
    let t = |i: usize| at(&toks, i);
    let (mut refs, mut test_mods) = (Vec::new(), Vec::new());
    // Inline `mod x { .. }` blocks entered, each with the brace depth outside it.
    let (mut i, mut depth, mut inline) = (0, 0, Vec::<(String, usize)>::new());
    let here = |inline: &[(String, usize)]| -> Vec<String> {
        let inline = inline.iter().map(|m| m.0.clone());
        module.iter().cloned().chain(inline).collect()
    };
    while i < toks.len() {
        match t(i) {
            "#" if [t(i + 1), t(i + 2), t(i + 3), t(i + 4)] == ["[", "cfg", "(", "test"] => {
                i = close_of(&toks, i + 1) + 1; // then any other attributes, then the item
                while t(i) == "#" && t(i + 1) == "[" {
                    i = close_of(&toks, i + 1) + 1;
                }
                if t(i) == "mod" && t(i + 2) == ";" {
                    test_mods.push([here(&inline), vec![t(i + 1).to_string()]].concat());
                }
                while i < toks.len() && t(i) != ";" && t(i) != "{" {
                    let bracket = matches!(t(i), "(" | "[");
                    i = if bracket {
                        close_of(&toks, i) + 1
                    } else {
                        i + 1
                    };
                }
                i = if t(i) == "{" { close_of(&toks, i) } else { i } + 1;
            }
            "#" if [t(i + 1), t(i + 2), t(i + 3), t(i + 5)] == ["!", "[", "cfg", "test"] => {
                break; // the whole file is test code
            }
            "mod" if t(i + 2) == "{" => {
                inline.push((t(i + 1).to_string(), depth));
                (depth, i) = (depth + 1, i + 3);
            }
            "{" => (depth, i) = (depth + 1, i + 1),
            "}" => {
                (depth, i) = (depth.saturating_sub(1), i + 1);
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
            }
            "crate" | "super" | "self" if t(i + 1) == "::" && t(i.wrapping_sub(1)) != "::" => {
                let (mut paths, line) = (Vec::new(), toks[i].1);
                i = use_tree(&toks, i, here(&inline), &mut paths);
                refs.extend(paths.into_iter().map(|path| (path, line)));
            }
            _ => i += 1,
        }
    }
    (refs, test_mods)
}

/// The index of the bracket closing the one at `open`.
fn close_of(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0;
    for (j, (tok, _)) in toks.iter().enumerate().skip(open) {
        match tok.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return j;
        }
    }
    toks.len()
}

/// Expands the path or use tree at `i` onto `path`; returns the index after it.
fn use_tree(
    toks: &[Tok],
    mut i: usize,
    mut path: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match at(toks, i) {
            "{" => {
                i += 1;
                while i < toks.len() && at(toks, i) != "}" {
                    i = use_tree(toks, i, path.clone(), out);
                    i += usize::from(at(toks, i) == ",");
                }
                return i + 1;
            }
            word if word.starts_with(|ch: char| ch.is_alphanumeric() || ch == '_') => {
                match word {
                    "crate" => path.clear(),
                    "super" => drop(path.pop()),
                    "self" => {}
                    _ => path.push(word.to_string()),
                }
                if at(toks, i + 1) != "::" {
                    out.push(path);
                    return i + if at(toks, i + 1) == "as" { 3 } else { 1 };
                }
                i += 2;
            }
            _ => {
                out.push(path); // `*`, a turbofish, or the end of the path
                return i;
            }
        }
    }
}

/// The module path of a file given relative to the crate's `src/`.
fn module_of(file: &str) -> Vec<String> {
    let file = file.trim_end_matches(".rs").trim_end_matches("/mod");
    file.split('/').map(String::from).collect()
}

/// Every violation of `table` by `files` (path relative to `src/`, contents).
fn check(table: &Table, files: &[(String, String)]) -> Vec<String> {
    let dir = &table.dir;
    let (mut problems, mut layer_of) = (Vec::new(), BTreeMap::new());
    for (n, (modules, _)) in table.layers.iter().enumerate() {
        for m in modules {
            if layer_of.insert(m.clone(), n).is_some() {
                problems.push(format!("{dir}: `{m}` is listed twice"));
            }
        }
    }
    let is_root = |f: &&(String, String)| f.0 == "lib.rs" || f.0 == "main.rs";
    let mut files: Vec<_> = files.iter().filter(|f| !is_root(f)).collect();
    files.sort_by_key(|(f, _)| module_of(f)); // parents first: `#[cfg(test)] mod x;` before x
    let units: BTreeSet<String> = files.iter().map(|(f, _)| module_of(f)[0].clone()).collect();
    for unit in units.iter().filter(|u| !layer_of.contains_key(*u)) {
        problems.push(format!("{dir}: `{unit}` is in no layer"));
    }
    for (m, n) in layer_of.iter().filter(|(m, _)| !units.contains(*m)) {
        problems.push(format!("{dir}: `{m}` (layer {n}) has no {m}.rs or {m}/"));
    }
    // [dir module, handler] for every file at least one level down a HANDLER_DIRS module.
    let handlers: BTreeSet<Vec<String>> = files
        .iter()
        .map(|(f, _)| module_of(f))
        .filter(|m| m.len() >= 2 && HANDLER_DIRS.contains(&(dir.as_str(), m[0].as_str())))
        .map(|m| m[..2].to_vec())
        .collect();
    let mut test_only: Vec<Vec<String>> = Vec::new();
    // Imports between modules of one `yes` layer: allowed, but never in a circle.
    let mut peers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, src) in files {
        let module = module_of(file);
        if test_only.iter().any(|t| module.starts_with(t)) {
            continue;
        }
        let (refs, tests) = references(src, &module);
        test_only.extend(tests);
        let (unit, mut seen) = (&module[0], BTreeSet::new());
        let handler = module.get(..2).filter(|m| handlers.contains(*m));
        for (path, line) in refs {
            let Some(to) = path.first() else { continue };
            let loc = format!("{dir}/{file}:{line}");
            if let (Some(own), Some(other)) = (handler, path.get(..2)) {
                if other != own && handlers.contains(other) && seen.insert(other.to_vec()) {
                    let why = format!("handlers of `{to}` never import each other");
                    problems.push(format!("{loc} imports {} ({why})", other.join("::")));
                }
            }
            // Within the unit, an item of the crate root, unplaceable or already reported:
            let (Some(&from_n), Some(&to_n)) = (layer_of.get(unit), layer_of.get(to)) else {
                continue;
            };
            if to == unit || !units.contains(to) || !seen.insert(vec![to.clone()]) {
                continue;
            }
            let why = if to_n > from_n {
                "upward"
            } else if to_n == from_n && !table.layers[from_n].1 {
                "same layer, `no`"
            } else {
                if to_n == from_n {
                    peers.entry(unit.clone()).or_default().insert(to.clone());
                }
                continue;
            };
            problems.push(format!(
                "{loc} imports {to} (layer {from_n} -> {to_n}: {why})"
            ));
        }
    }
    for circle in circles(&peers) {
        problems.push(format!(
            "{dir}: modules import each other in a circle: {circle}"
        ));
    }
    problems
}

/// Every circle of `edges`, once each, as `a -> b -> a` starting from its
/// smallest module.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    fn walk<'a>(
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        found: &mut BTreeSet<String>,
    ) {
        let last = path[path.len() - 1];
        for next in edges.get(last).into_iter().flatten() {
            if next == path[0] {
                found.insert(format!("{} -> {}", path.join(" -> "), path[0]));
            } else if next.as_str() > path[0] && !path.contains(&next.as_str()) {
                path.push(next);
                walk(edges, path, found);
                path.pop();
            }
        }
    }
    let mut found = BTreeSet::new();
    for start in edges.keys() {
        walk(edges, &mut vec![start.as_str()], &mut found);
    }
    found
}

/// Every `.rs` file under `dir`, relative to `root`, with its contents.
fn read_sources(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for path in entries.map(|e| e.expect("directory entry").path()) {
        if path.is_dir() {
            read_sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let src = std::fs::read_to_string(&path).expect("readable source");
            let rel = path.strip_prefix(root).expect("under root");
            out.push((rel.to_string_lossy().into_owned(), src));
        }
    }
}

#[test]
fn every_crate_keeps_its_documented_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let markdown = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let tables = parse_tables(&markdown);
    assert!(
        !tables.is_empty(),
        "ARCHITECTURE.md has no `<!-- layers: <dir> -->` table"
    );
    let mut problems = Vec::new();
    for table in &tables {
        let (src, mut files) = (root.join(&table.dir), Vec::new());
        read_sources(&src, &src, &mut files);
        problems.extend(check(table, &files));
    }
    let list = problems.join("\n  ");
    assert!(
        problems.is_empty(),
        "the layers of ARCHITECTURE.md (## Layers) are broken:\n  {list}\n"
    );
}

// The checker itself, on a synthetic crate: a, b (0, yes) < c, d (1, no) < methods (2).

const TABLE: &str = "<!-- layers: src -->
| layer | modules | imports within the layer |
|---|---|---|
| 0 base | `a`, `b` | yes |
| 1 mid | `c`, `d` | no |
| 2 top | `methods` | no |
<!-- /layers -->";

/// The problems of the synthetic crate in `dir`, with `files` added or replaced.
fn problems_in(dir: &str, files: &[(&str, &str)]) -> Vec<String> {
    let table = parse_tables(&TABLE.replace("src", dir)).remove(0);
    let base = ["a.rs", "b.rs", "c.rs", "d.rs", "methods/mod.rs"].map(|f| (f, ""));
    let base = base
        .iter()
        .filter(|(f, _)| !files.iter().any(|g| g.0 == *f));
    let all: Vec<_> = base
        .chain(files)
        .map(|(f, s)| (f.to_string(), s.to_string()))
        .collect();
    check(&table, &all)
}

fn expect(files: &[(&str, &str)], want: &[&str]) {
    assert_eq!(problems_in("src", files), want);
}

#[test]
fn downward_imports_pass() {
    let c = "use crate::a::X;\nuse super::b;\nfn f() { crate::a::g(); }";
    expect(&[("c.rs", c), ("a.rs", "use crate::b::Y;")], &[]);
}

#[test]
fn an_upward_import_is_caught() {
    let a = "\n\nfn f() -> crate::c::T { todo() }";
    expect(
        &[("a.rs", a)],
        &["src/a.rs:3 imports c (layer 0 -> 1: upward)"],
    );
}

#[test]
fn same_layer_follows_the_third_column() {
    let c = "pub(crate) use crate::d::Z;";
    expect(
        &[("c.rs", c)],
        &["src/c.rs:1 imports d (layer 1 -> 1: same layer, `no`)"],
    );
    expect(&[("a.rs", "use crate::b::Z;")], &[]);
}

#[test]
fn a_circle_within_a_layer_is_caught() {
    let a = "use crate::b::X;";
    let b = "fn f() { crate::a::g(); }";
    expect(
        &[("a.rs", a), ("b.rs", b)],
        &["src: modules import each other in a circle: a -> b -> a"],
    );
    expect(&[("a.rs", a)], &[]);
}

#[test]
fn super_chains_resolve_by_file_position() {
    // In src/a.rs `super` is the root; in src/c/x.rs `super` is c, `super::super` the root.
    expect(
        &[("a.rs", "use super::c;")],
        &["src/a.rs:1 imports c (layer 0 -> 1: upward)"],
    );
    let x = "use super::y;\n\nuse super::super::methods::T;";
    expect(
        &[("c/x.rs", x)],
        &["src/c/x.rs:3 imports methods (layer 1 -> 2: upward)"],
    );
    let x = "use super::y::Z; use self::inner::W; mod m { use super::super::d::X; }";
    expect(&[("c/x.rs", x)], &[]);
}

#[test]
fn comments_strings_and_test_modules_are_ignored() {
    let a = r##"// use crate::c;
/// [`crate::c::T`] in a doc link
/* use crate::c; /* nested */ crate::c::f(); */
const S: &str = "crate::c::f() \" crate::c"; const R: &str = r#"crate::c "q""#;
fn f<'a>(x: &'a str) -> char { '"' }
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests { use crate::c::T; fn t() { crate::methods::run(); } }
"##;
    expect(&[("a.rs", a)], &[]);
}

#[test]
fn grouped_uses_count_every_branch() {
    let a = "use crate::{b as bee, c::{x, y},\n    methods::{self as m, z}};";
    let want = [
        "src/a.rs:1 imports c (layer 0 -> 1: upward)",
        "src/a.rs:1 imports methods (layer 0 -> 2: upward)",
    ];
    expect(&[("a.rs", a)], &want);
}

#[test]
fn root_items_are_allowed() {
    let a = "use crate::Thing;\nfn f() -> crate::Other { crate::make() }";
    expect(&[("a.rs", a)], &[]);
}

#[test]
fn every_module_is_listed_once_and_exists() {
    let table = parse_tables(&TABLE.replace("`c`, `d`", "`c`, `a`")).remove(0);
    let files = ["a.rs", "b.rs", "d.rs", "e/mod.rs", "methods/mod.rs"];
    let found = check(&table, &files.map(|f| (f.to_string(), String::new())));
    let want = [
        "src: `a` is listed twice",
        "src: `d` is in no layer",
        "src: `e` is in no layer",
        "src: `c` (layer 1) has no c.rs or c/",
    ];
    assert_eq!(found, want);
}

#[test]
fn handlers_never_import_each_other() {
    let table = (
        "methods/mod.rs",
        "pub mod tools; pub mod prompts; use self::tools::call;",
    );
    let files = |tools| {
        [
            table,
            ("methods/prompts.rs", ""),
            ("methods/tools.rs", tools),
        ]
    };
    let tools = "use super::{prompts, Shared};\nfn f() { crate::methods::prompts::get(); }";
    let why = "handlers of `methods` never import each other";
    let want = format!("crates/server/src/methods/tools.rs:1 imports methods::prompts ({why})");
    assert_eq!(problems_in("crates/server/src", &files(tools)), [want]);
    let fine = "use super::Shared; use crate::a::X;";
    assert_eq!(problems_in("crates/server/src", &files(fine)), [""; 0]);
}

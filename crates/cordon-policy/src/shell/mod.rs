//! Shell command analysis: find every simple command a script would run.
//!
//! The policy never matches rules against a whole shell string. A script is parsed with a
//! real bash parser, every simple command is found (in lists, pipelines, subshells,
//! substitutions, function bodies, loops, heredocs fed to shells…), wrappers such as
//! `sudo`, `env` or `bash -c` are unwrapped, and each command is checked on its own. Anything
//! the analysis cannot see through is recorded as a problem, and a script with a problem is
//! never allowed.

mod dialect;
mod getopt;
mod heuristics;
mod plain;
mod words;
mod wrappers;

use brush_parser::ParserOptions;
use brush_parser::ast;

pub use dialect::{Dialect, differs};
pub use heuristics::{Heuristic, danger, is_read_only};
pub use words::Known;
use words::{WordInfo, analyse_word, arithmetic_problem};

/// Nesting of `bash -c "$(…)"`-style scripts deeper than this is refused, so a hostile input
/// cannot make the analysis recurse without bound.
const MAX_DEPTH: usize = 12;

/// Longest script we analyse; longer ones are refused rather than parsed.
const MAX_SCRIPT_LEN: usize = 64 * 1024;

/// Deepest bracket nesting we hand to the parser. The parser recurses on nesting, and a
/// stack overflow cannot be caught, so hostile depth is refused before parsing.
const MAX_NESTING: usize = 64;

/// How deeply `(` and `{` nest in the text, counted without regard to quoting: an over-count
/// only makes us refuse a script that is odd anyway.
fn nesting(script: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in script.bytes() {
        match b {
            b'(' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// How a command takes part in the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The command runs: it must be allowed for the script to be allowed.
    Runs,
    /// A form of the script that does not run as such (a wrapper around an inner command, the
    /// whole script): a rule naming it can deny or ask, but it never needs to be allowed.
    Context,
}

/// One simple command the script would run.
#[derive(Debug, Clone)]
pub struct SimpleCommand {
    /// Command name and arguments after quote removal; parts only known at run time are kept
    /// as written (`$HOME`).
    pub words: Vec<String>,
    /// The command written out again in a canonical form: words quoted only where needed and
    /// separated by one space. Rules match this text.
    pub text: String,
    /// Files the command's redirections write to (`>`, `>>`, `&>`, …).
    pub writes: Vec<String>,
    /// Variables set for this command (`VAR=x cmd`, `env VAR=x cmd`, `export VAR=x`).
    pub assignments: Vec<String>,
    /// The wrappers this command was found inside, outermost first (`sudo`, `bash -c`, `$(…)`).
    pub via: Vec<String>,
    pub role: Role,
    /// How much of each word is known before the script runs, word by word.
    pub known: Vec<Known>,
    /// More arguments, known only at run time, follow the written ones (what `xargs` appends).
    pub more_at_run_time: bool,
}

impl SimpleCommand {
    pub fn name(&self) -> Option<&str> {
        self.words.first().map(String::as_str)
    }

    /// Whether every word, and nothing more, is known before the script runs.
    pub fn is_literal(&self) -> bool {
        !self.more_at_run_time && self.known.iter().all(|k| *k == Known::Literal)
    }

    /// How much of word `i` is known.
    pub fn known(&self, i: usize) -> Known {
        self.known.get(i).copied().unwrap_or(Known::Literal)
    }

    fn new(words: Vec<String>, via: &[String], role: Role) -> Self {
        let text = canonical_text(&words);
        SimpleCommand {
            known: vec![Known::Literal; words.len()],
            words,
            text,
            writes: Vec::new(),
            assignments: Vec::new(),
            via: via.to_vec(),
            role,
            more_at_run_time: false,
        }
    }
}

/// Everything the analysis found in one script.
#[derive(Debug, Clone, Default)]
pub struct ShellAnalysis {
    pub commands: Vec<SimpleCommand>,
    /// Every file a redirection names, read from or written to (`< in`, `> out`, `&> log`),
    /// as written.
    pub redirected: Vec<String>,
    /// Why parts of the script could not be analysed. Non-empty means: never allow.
    pub problems: Vec<String>,
}

impl ShellAnalysis {
    pub fn is_analysable(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Analyses a shell script as bash would read it.
pub fn analyse(script: &str) -> ShellAnalysis {
    analyse_as(script, Dialect::Bash)
}

/// Analyses a shell script that `dialect`'s shell will run: as bash reads it, with every
/// construct that shell reads otherwise a problem.
pub fn analyse_as(script: &str, dialect: Dialect) -> ShellAnalysis {
    analyse_with(script, dialect, true)
}

fn analyse_with(script: &str, dialect: Dialect, fast_path: bool) -> ShellAnalysis {
    let mut walker = Walker {
        options: parser_options(),
        out: ShellAnalysis::default(),
        fast_path,
        dialect,
    };
    walker.script(script, 0, &[]);
    walker.out
}

/// bash's grammar as `bash -c` reads a script: extended globs (`!(…)`, `@(…)`) only after a
/// `shopt -s extglob` the analysis does not follow, so off. (With them on, `!(rm -f f)`
/// would read as one pattern where bash runs `rm` in a negated subshell.)
fn parser_options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        ..ParserOptions::default()
    }
}

pub(crate) fn canonical_text(words: &[String]) -> String {
    let mut text = String::with_capacity(words.iter().map(|w| w.len() + 1).sum());
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        let plain = !w.is_empty() && w.bytes().all(needs_no_quotes);
        if plain || w.starts_with(['$', '~']) || w.contains("$(") || w.contains('`') {
            // Plain words need no quotes; dynamic parts are kept as written so rules can still
            // see `$HOME` etc.
            text.push_str(w);
        } else {
            match shlex::try_quote(w) {
                Ok(q) => text.push_str(&q),
                Err(_) => text.push_str(w),
            }
        }
    }
    text
}

fn needs_no_quotes(b: u8) -> bool {
    matches!(b, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'/' | b'=' | b':' | b',' | b'+' | b'@' | b'%')
}

struct Walker {
    options: ParserOptions,
    out: ShellAnalysis,
    /// Split plain scripts without the full parser (off only to test that it agrees).
    fast_path: bool,
    /// The grammar of the shell that runs the script being walked.
    dialect: Dialect,
}

impl Walker {
    fn problem(&mut self, why: impl Into<String>) {
        self.out.problems.push(why.into());
    }

    /// Walks `script`, which the shell of `dialect` runs (the current one when `None`).
    pub(crate) fn script_in(
        &mut self,
        script: &str,
        depth: usize,
        via: &[String],
        dialect: Option<Dialect>,
    ) {
        let outer = self.dialect;
        self.dialect = dialect.unwrap_or(outer);
        self.script(script, depth, via);
        self.dialect = outer;
    }

    pub(crate) fn script(&mut self, script: &str, depth: usize, via: &[String]) {
        if depth > MAX_DEPTH {
            self.problem(format!("scripts nested more than {MAX_DEPTH} levels deep"));
            return;
        }
        if script.len() > MAX_SCRIPT_LEN {
            self.problem(format!("script longer than {MAX_SCRIPT_LEN} bytes"));
            return;
        }
        if nesting(script) > MAX_NESTING {
            self.problem(format!(
                "brackets nested more than {MAX_NESTING} levels deep"
            ));
            return;
        }
        if let Some(why) = dialect::differs(script, self.dialect) {
            self.problem(why);
        }
        if self.fast_path
            && let Some(commands) = plain::split_plain(script)
        {
            for c in commands {
                let cmd = SimpleCommand::new(c.words, via, Role::Runs);
                wrappers::unwrap(self, cmd, c.piped.then_some(HereDoc::Pipe), depth);
            }
            return;
        }
        let parsed = guarded(|| {
            brush_parser::Parser::new(std::io::Cursor::new(script), &self.options).parse_program()
        });
        match parsed {
            Some(Ok(program)) => {
                for list in &program.complete_commands {
                    self.compound_list(list, depth, via);
                }
            }
            Some(Err(e)) => self.problem(format!("the shell parser rejected the script: {e}")),
            None => self.problem("the shell parser failed on this script"),
        }
    }

    fn compound_list(&mut self, list: &ast::CompoundList, depth: usize, via: &[String]) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, depth, via);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, depth, via),
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, depth: usize, via: &[String]) {
        for (i, cmd) in pipeline.seq.iter().enumerate() {
            let stdin_is_pipe = i > 0;
            self.command(cmd, depth, via, stdin_is_pipe);
        }
    }

    fn command(&mut self, cmd: &ast::Command, depth: usize, via: &[String], piped: bool) {
        match cmd {
            ast::Command::Simple(simple) => self.simple(simple, depth, via, piped),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound, depth, via);
                if let Some(r) = redirects {
                    self.bare_redirects(&r.0, depth, via);
                }
            }
            ast::Command::Function(f) => {
                let mut inner = via.to_vec();
                inner.push(format!("function {}", f.fname.value));
                self.compound(&f.body.0, depth, &inner);
                if let Some(r) = &f.body.1 {
                    self.bare_redirects(&r.0, depth, &inner);
                }
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.extended_test(&test.expr, depth, via);
                if let Some(r) = redirects {
                    self.bare_redirects(&r.0, depth, via);
                }
            }
        }
    }

    fn compound(&mut self, c: &ast::CompoundCommand, depth: usize, via: &[String]) {
        use ast::CompoundCommand as C;
        match c {
            C::Arithmetic(a) => self.arithmetic(&a.expr.value),
            C::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&e.value);
                }
                self.compound_list(&f.body.list, depth, via);
            }
            C::BraceGroup(b) => self.compound_list(&b.list, depth, via),
            C::Subshell(s) => self.compound_list(&s.list, depth, via),
            C::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(&w.value, depth, via);
                }
                self.compound_list(&f.body.list, depth, via);
            }
            C::CaseClause(c) => {
                self.word(&c.value.value, depth, via);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value, depth, via);
                    }
                    if let Some(list) = &item.cmd {
                        self.compound_list(list, depth, via);
                    }
                }
            }
            C::IfClause(i) => {
                self.compound_list(&i.condition, depth, via);
                self.compound_list(&i.then, depth, via);
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        self.compound_list(cond, depth, via);
                    }
                    self.compound_list(&e.body, depth, via);
                }
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.compound_list(&w.0, depth, via);
                self.compound_list(&w.1.list, depth, via);
            }
            C::Coprocess(c) => self.command(&c.body, depth, via, false),
        }
    }

    fn arithmetic(&mut self, expr: &str) {
        if let Some(why) = arithmetic_problem(expr) {
            self.problem(why);
        }
    }

    fn extended_test(&mut self, e: &ast::ExtendedTestExpr, depth: usize, via: &[String]) {
        use ast::BinaryPredicate as B;
        use ast::ExtendedTestExpr as E;
        match e {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a, depth, via);
                self.extended_test(b, depth, via);
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a, depth, via),
            E::UnaryTest(pred, w) => {
                let info = self.word(&w.value, depth, via);
                // `-v NAME` and `-R NAME` look the name up, evaluating its array index.
                let names_a_variable = matches!(
                    pred,
                    ast::UnaryPredicate::ShellVariableIsSetAndAssigned
                        | ast::UnaryPredicate::ShellVariableIsSetAndNameRef
                );
                if names_a_variable
                    && let Some(why) = words::name_problem(info.value(), info.dynamic)
                {
                    self.problem(why);
                }
            }
            E::BinaryTest(pred, a, b) => {
                let arithmetic = matches!(
                    pred,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                );
                for w in [a, b] {
                    let info = self.word(&w.value, depth, via);
                    if arithmetic && (info.dynamic || arithmetic_problem(info.value()).is_some()) {
                        self.problem(format!(
                            "`[[ … -eq … ]]` evaluates `{}` as arithmetic, which can run commands",
                            w.value
                        ));
                    }
                }
            }
        }
    }

    /// Analyses a word for the scripts it runs; returns what it found.
    fn word(&mut self, raw: &str, depth: usize, via: &[String]) -> WordInfo {
        let info = analyse_word(raw, &self.options);
        if let Some(p) = &info.problem {
            self.problem(p.clone());
        }
        for sub in &info.substitutions {
            let mut inner = via.to_vec();
            inner.push("$(…)".to_string());
            self.script(sub, depth + 1, &inner);
        }
        info
    }

    /// Redirections on a command without a name (`> file`, `{ …; } > file`).
    fn bare_redirects(&mut self, redirects: &[ast::IoRedirect], depth: usize, via: &[String]) {
        let mut writes = Vec::new();
        let mut heredoc = None;
        for r in redirects {
            self.redirect(r, depth, via, &mut writes, &mut heredoc);
        }
        if !writes.is_empty() {
            let mut cmd = SimpleCommand::new(Vec::new(), via, Role::Runs);
            cmd.writes = writes;
            self.out.commands.push(cmd);
        }
    }

    fn redirect(
        &mut self,
        r: &ast::IoRedirect,
        depth: usize,
        via: &[String],
        writes: &mut Vec<String>,
        heredoc: &mut Option<HereDoc>,
    ) {
        use ast::IoFileRedirectKind as K;
        use ast::IoFileRedirectTarget as T;
        match r {
            ast::IoRedirect::File(_, kind, target) => match target {
                T::Filename(w) => {
                    let info = self.word(&w.value, depth, via);
                    self.redirected(info.value());
                    let writing =
                        matches!(kind, K::Write | K::Append | K::Clobber | K::ReadAndWrite);
                    if writing && !is_harmless_sink(info.value()) {
                        writes.push(info.value().to_string());
                    }
                    if matches!(kind, K::Read) {
                        *heredoc = Some(HereDoc::FromFile);
                    }
                }
                T::Duplicate(w) => {
                    // `>&file` is a write to a file unless the word is a descriptor or `-`.
                    let info = self.word(&w.value, depth, via);
                    let v = info.value();
                    let is_fd =
                        v == "-" || v.trim_end_matches('-').chars().all(|c| c.is_ascii_digit());
                    if matches!(kind, K::DuplicateOutput) && !is_fd && !is_harmless_sink(v) {
                        writes.push(v.to_string());
                    }
                    if !is_fd {
                        self.redirected(v);
                    }
                }
                T::Fd(_) => {}
                T::ProcessSubstitution(_, sub) => {
                    let mut inner = via.to_vec();
                    inner.push("<(…)".to_string());
                    self.compound_list(&sub.list, depth + 1, &inner);
                }
            },
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    self.heredoc_expansions(&doc.doc.value, depth, via);
                }
                *heredoc = Some(HereDoc::Body {
                    text: doc.doc.value.clone(),
                    expands: doc.requires_expansion && doc.doc.value.contains(['$', '`', '\\']),
                });
            }
            ast::IoRedirect::HereString(_, w) => {
                let info = self.word(&w.value, depth, via);
                *heredoc = Some(HereDoc::Body {
                    text: info.value().to_string(),
                    expands: info.dynamic,
                });
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                let info = self.word(&w.value, depth, via);
                self.redirected(info.value());
                if !is_harmless_sink(info.value()) {
                    writes.push(info.value().to_string());
                }
            }
        }
    }

    fn redirected(&mut self, file: &str) {
        if !is_harmless_sink(file) {
            self.out.redirected.push(file.to_string());
        }
    }

    fn heredoc_expansions(&mut self, body: &str, depth: usize, via: &[String]) {
        match brush_parser::word::parse_heredoc(body, &self.options) {
            Ok(pieces) => {
                let mut scripts = Vec::new();
                find_substitutions(&pieces, &mut scripts);
                for s in scripts {
                    let mut inner = via.to_vec();
                    inner.push("$(…)".to_string());
                    self.script(&s, depth + 1, &inner);
                }
            }
            Err(e) => self.problem(format!("cannot parse a heredoc body: {e}")),
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, depth: usize, via: &[String], piped: bool) {
        let mut words: Vec<String> = Vec::new();
        let mut known: Vec<Known> = Vec::new();
        let mut name_dynamic = false;
        let mut name_glob = false;
        let mut writes = Vec::new();
        let mut assignments = Vec::new();
        let mut heredoc = None;

        // Prefix, name and suffix in the order the shell evaluates them.
        let items: Vec<Item<'_>> = simple
            .prefix
            .iter()
            .flat_map(|p| p.0.iter().map(Item::Ast))
            .chain(simple.word_or_name.iter().map(Item::Name))
            .chain(simple.suffix.iter().flat_map(|s| s.0.iter().map(Item::Ast)))
            .collect();
        for item in items {
            use ast::CommandPrefixOrSuffixItem as I;
            let raw_word = match item {
                Item::Name(w) | Item::Ast(I::Word(w)) => Some(&w.value),
                Item::Ast(I::AssignmentWord(a, w)) => {
                    let name = match &a.name {
                        ast::AssignmentName::VariableName(n) => n.clone(),
                        ast::AssignmentName::ArrayElementName(n, index) => {
                            if arithmetic_problem(index).is_some() {
                                self.problem(format!(
                                    "the array index in `{}` is evaluated as arithmetic, whose variables can run commands",
                                    w.value
                                ));
                            }
                            n.clone()
                        }
                    };
                    if words.is_empty() {
                        // `VAR=x cmd`: the value's substitutions still run.
                        match &a.value {
                            ast::AssignmentValue::Scalar(v) => {
                                self.word(&v.value, depth, via);
                            }
                            ast::AssignmentValue::Array(items) => {
                                for (k, v) in items {
                                    if let Some(k) = k {
                                        self.word(&k.value, depth, via);
                                    }
                                    self.word(&v.value, depth, via);
                                }
                            }
                        }
                        assignments.push(name);
                        None
                    } else {
                        // After the command name it is an ordinary argument (`export A=b`).
                        Some(&w.value)
                    }
                }
                Item::Ast(I::IoRedirect(r)) => {
                    self.redirect(r, depth, via, &mut writes, &mut heredoc);
                    None
                }
                Item::Ast(I::ProcessSubstitution(_, sub)) => {
                    let mut inner = via.to_vec();
                    inner.push("<(…)".to_string());
                    self.compound_list(&sub.list, depth + 1, &inner);
                    words.push("<(…)".to_string());
                    known.push(Known::OneWord);
                    None
                }
            };
            if let Some(raw) = raw_word {
                let info = self.word(raw, depth, via);
                if words.is_empty() {
                    name_dynamic = info.dynamic;
                    name_glob = info.glob;
                }
                known.extend(std::iter::repeat_n(info.known, info.values.len()));
                words.extend(info.values);
            }
        }

        if words.is_empty() {
            let mut cmd = SimpleCommand::new(Vec::new(), via, Role::Runs);
            cmd.writes = writes;
            cmd.assignments = assignments;
            if !cmd.writes.is_empty() || !cmd.assignments.is_empty() {
                self.out.commands.push(cmd);
            }
            return;
        }
        if name_dynamic {
            self.problem(format!(
                "the command name `{}` is only known at run time",
                words[0]
            ));
        } else if name_glob {
            self.problem(format!(
                "the command name `{}` is a file-name pattern",
                words[0]
            ));
        }

        let mut cmd = SimpleCommand::new(words, via, Role::Runs);
        cmd.known = known;
        cmd.writes = writes;
        cmd.assignments = assignments;
        let stdin = if piped { Some(HereDoc::Pipe) } else { heredoc };
        wrappers::unwrap(self, cmd, stdin, depth);
    }

    fn push(&mut self, cmd: SimpleCommand) {
        self.out.commands.push(cmd);
    }
}

/// What a command reads on standard input, for shells that would run it as a script.
#[derive(Debug, Clone)]
pub(crate) enum HereDoc {
    Body { text: String, expands: bool },
    FromFile,
    Pipe,
}

enum Item<'a> {
    Ast(&'a ast::CommandPrefixOrSuffixItem),
    Name(&'a ast::Word),
}

/// Runs a parser call, turning a panic inside the parser into `None`: a bug in a dependency
/// must make a script unanalysable (never allowed), not crash cordon.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

fn is_harmless_sink(target: &str) -> bool {
    matches!(
        target,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    )
}

fn find_substitutions(pieces: &[brush_parser::word::WordPieceWithSource], out: &mut Vec<String>) {
    use brush_parser::word::WordPiece as P;
    for p in pieces {
        match &p.piece {
            P::CommandSubstitution(s) | P::BackquotedCommandSubstitution(s) => out.push(s.clone()),
            P::DoubleQuotedSequence(inner) | P::GettextDoubleQuotedSequence(inner) => {
                find_substitutions(inner, out)
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(script: &str) -> Vec<String> {
        let a = analyse(script);
        assert!(a.is_analysable(), "{script}: {:?}", a.problems);
        a.commands
            .iter()
            .filter(|c| c.role == Role::Runs)
            .map(|c| c.text.clone())
            .collect()
    }

    fn refused(script: &str) -> bool {
        !analyse(script).is_analysable()
    }

    #[test]
    fn finds_every_simple_command() {
        assert_eq!(
            runs("a && b || c; d & e | f"),
            ["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(runs("(a; b)"), ["a", "b"]);
        assert_eq!(
            runs("echo $(rm x) `id`"),
            ["rm x", "id", "echo $(rm x) `id`"]
        );
        assert_eq!(
            runs("diff <(ls a) <(ls b)"),
            ["ls a", "ls b", "diff '<(…)' '<(…)'"]
        );
        assert_eq!(runs("f() { rm -r x; }; f"), ["rm -r x", "f"]);
        assert_eq!(
            runs("if a; then b; elif c; then d; else e; fi"),
            ["a", "b", "c", "d", "e"]
        );
        assert_eq!(runs("for i in 1 2; do echo $i; done"), ["echo $i"]);
        assert_eq!(runs("while a; do b; done"), ["a", "b"]);
        assert_eq!(runs("case x in a) b;; *) c;; esac"), ["b", "c"]);
        assert_eq!(runs("cat <<EOF\n$(whoami)\nEOF\n"), ["whoami", "cat"]);
    }

    #[test]
    fn quoting_is_normalised() {
        assert_eq!(runs("'git'  \"status\""), ["git status"]);
        assert_eq!(runs("git commit -m \"a b\""), ["git commit -m 'a b'"]);
        assert_eq!(runs("'git status'"), ["'git status'"]);
    }

    #[test]
    fn redirections_are_recorded() {
        let a = analyse("echo hi > out.txt 2>&1; ls 2>/dev/null");
        assert_eq!(a.commands[0].writes, ["out.txt"]);
        assert!(a.commands[1].writes.is_empty());
        let a = analyse("{ echo; } > f");
        assert_eq!(a.commands[1].writes, ["f"]);
        let a = analyse("cat < ~/in 2>/dev/null; echo $(wc &> log) >&out");
        assert_eq!(a.redirected, ["~/in", "log", "out"]);
    }

    /// The plain fast path must give exactly what the full parser gives, on every script it
    /// accepts.
    #[test]
    fn the_plain_fast_path_agrees_with_the_parser() {
        const PIECES: &[&str] = &[
            "ls",
            "-la",
            "rm",
            "-rf",
            "/",
            "'a b'",
            "''",
            "x=1",
            "A=1",
            "if",
            "then",
            "bash",
            "-c",
            "'echo hi && rm x'",
            "sudo",
            "env",
            "timeout",
            "5",
            "xargs",
            "git",
            "push",
            "--force",
            "%",
            "@",
            "a,b",
            "x:y",
            "+",
            "sh",
            "-s",
            "time",
            "{",
            "!",
            "'it''s'",
            "find",
            "-exec",
            "-delete",
            "\\;",
            "nohup",
            "o'k'",
            "&&",
            "||",
            "|",
            ";",
            "&",
            "&&",
            "|",
            " ",
            " ",
            "\t",
            "|&",
            ";;",
            "2>&1",
            ">/dev/null",
            "2>/dev/null",
            ">&2",
            "1>&2",
            ">x",
            "2>&1x",
            "a2>&1",
            "2",
            ">",
            ">&",
            "&>/dev/null",
            "2>/dev/nullx",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut fast_accepted = 0;
        for _ in 0..40_000 {
            let len = (next() % 10) as usize + 1;
            let script: Vec<&str> = (0..len)
                .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                .collect();
            let script = script.join(" ");
            if plain::split_plain(&script).is_none() {
                continue;
            }
            fast_accepted += 1;
            let fast = analyse_with(&script, Dialect::Bash, true);
            let full = analyse_with(&script, Dialect::Bash, false);
            let view = |a: &ShellAnalysis| -> Vec<String> {
                a.commands
                    .iter()
                    .map(|c| {
                        format!(
                            "{:?} {} {:?} {:?} {:?}",
                            c.role, c.text, c.via, c.writes, c.assignments
                        )
                    })
                    .collect()
            };
            assert_eq!(view(&fast), view(&full), "{script}");
            assert_eq!(fast.problems, full.problems, "{script}");
        }
        assert!(
            fast_accepted > 5_000,
            "the generator should exercise the fast path ({fast_accepted})"
        );
    }

    #[test]
    fn dynamic_names_and_parse_errors_are_refused() {
        assert!(refused("$cmd -rf /"));
        assert!(refused("\"$(echo rm)\" -rf /"));
        assert!(refused("/bin/r? -rf /"));
        assert!(refused("echo 'unterminated"));
        assert!(refused("((x))"));
        assert!(refused("echo ${x@P}"));
    }
}

//! Problems found while loading policy files, with where they are and how to fix them.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The policy cannot be trusted as written; cordon refuses to decide with it.
    Error,
    /// Loaded, but probably not what the author meant.
    Warning,
}

/// What went wrong, so tools can group and filter problems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    /// The file or directory could not be read.
    Read,
    /// The file is not valid TOML.
    TomlParse,
    /// A key is unknown, missing, or has the wrong type.
    Schema,
    /// The keys are valid one by one but do not make a sensible rule together.
    Rule,
    /// A pattern does not compile or could take exponential time.
    Regex,
    /// A tool name that looks like a typo.
    ToolName,
    /// A directory others could write to, holding rules that should be the administrator's.
    Permissions,
    /// A rule that was read but cannot take effect where it is (an allow in an untrusted
    /// workspace, an unavailable checker).
    Ignored,
}

impl IssueKind {
    fn as_str(self) -> &'static str {
        match self {
            IssueKind::Read => "read",
            IssueKind::TomlParse => "toml",
            IssueKind::Schema => "schema",
            IssueKind::Rule => "rule",
            IssueKind::Regex => "regex",
            IssueKind::ToolName => "tool-name",
            IssueKind::Permissions => "permissions",
            IssueKind::Ignored => "ignored",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadIssue {
    pub severity: Severity,
    pub kind: IssueKind,
    /// The file, when the problem is in one.
    pub file: Option<PathBuf>,
    /// 1-based; 0 when the problem is not at a place in a file.
    pub line: usize,
    pub column: usize,
    pub message: String,
    pub hint: Option<String>,
}

impl LoadIssue {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for LoadIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) if self.line > 0 => {
                write!(f, "{}:{}:{}: ", file.display(), self.line, self.column)?
            }
            Some(file) => write!(f, "{}: ", file.display())?,
            None => {}
        }
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{sev} [{}]: {}", self.kind.as_str(), self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

/// Turns byte offsets into 1-based line and column numbers.
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    pub fn position(&self, text: &str, offset: usize) -> (usize, usize) {
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let column = text
            .get(start..offset.min(text.len()))
            .map_or(1, |s| s.chars().count() + 1);
        (line, column)
    }
}

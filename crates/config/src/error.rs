//! Every problem found in a configuration, each tied to the key that caused it.

use std::fmt;

/// One problem with one key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(.path, .message))]
pub struct ConfigError {
    /// Key path in the YAML document, e.g. `upstreams[1].url` or
    /// `routes[0].include[2]`; empty when the problem concerns the whole
    /// document (unreadable file, YAML syntax).
    pub path: String,
    /// What is wrong and, where it helps, what would be right.
    pub message: String,
}

fn render(path: &str, message: &str) -> String {
    if path.is_empty() {
        message.to_owned()
    } else {
        format!("{path}: {message}")
    }
}

/// All problems found while loading: validation never stops at the first one,
/// so an operator fixes a file in one pass. Displays one error per line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors {
    /// In document order of discovery (sections in schema order).
    pub errors: Vec<ConfigError>,
}

impl ConfigErrors {
    pub(crate) fn single(path: impl Into<String>, message: impl Into<String>) -> ConfigErrors {
        ConfigErrors {
            errors: vec![ConfigError {
                path: path.into(),
                message: message.into(),
            }],
        }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.errors.iter()
    }

    pub fn len(&self) -> usize {
        self.errors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// The paths of every error, in order; handy for tests and for tooling.
    pub fn paths(&self) -> Vec<&str> {
        self.errors.iter().map(|e| e.path.as_str()).collect()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

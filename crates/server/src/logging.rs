//! Log levels across eras (NOTES §12.3, "Logging").
//!
//! A modern client asks for log messages per request with
//! `_meta["io.modelcontextprotocol/logLevel"]`, and gets none without it. A
//! handshake-era client sets one level per session with `logging/setLevel`;
//! Junction remembers it (sessions are sealed tokens, so the level lives in the
//! hub, per replica, bounded and expiring with the session) and stamps it into
//! the `_meta` of every upstream request of that session, so a modern upstream
//! sends what the client asked for. Whatever an upstream sends anyway (a
//! handshake-era upstream logs per its own session) is filtered here before it
//! reaches the client.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::time::Instant;

/// Sessions whose level one replica remembers at once.
pub(crate) const MAX_SESSIONS: usize = 10_000;

/// Syslog severities of MCP's `LoggingLevel`, least severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl Level {
    pub const NAMES: [&'static str; 8] = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];

    pub fn parse(s: &str) -> Option<Level> {
        use Level::*;
        Some(match s {
            "debug" => Debug,
            "info" => Info,
            "notice" => Notice,
            "warning" => Warning,
            "error" => Error,
            "critical" => Critical,
            "alert" => Alert,
            "emergency" => Emergency,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// Which `notifications/message` of one request reach its client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFilter {
    /// A modern request without `logLevel`: none (the spec's rule).
    Off,
    /// This severity and above.
    AtLeast(Level),
    /// A handshake-era session that never set a level: as the upstream sends.
    All,
}

impl LogFilter {
    /// The filter of a modern request: its `_meta` logLevel (already checked).
    pub fn modern(level: Option<Level>) -> LogFilter {
        level.map_or(LogFilter::Off, LogFilter::AtLeast)
    }

    /// The filter of a handshake-era session's request.
    pub fn legacy(level: Option<Level>) -> LogFilter {
        level.map_or(LogFilter::All, LogFilter::AtLeast)
    }

    /// Whether this notification goes to the client. Only log messages are
    /// filtered; anything else (progress…) passes.
    pub fn passes(self, notification: &RawValue) -> bool {
        if self == LogFilter::All {
            return true;
        }
        #[derive(Deserialize)]
        struct Head<'a> {
            #[serde(borrow)]
            method: std::borrow::Cow<'a, str>,
            #[serde(default)]
            params: Option<Params>,
        }
        #[derive(Deserialize)]
        struct Params {
            #[serde(default)]
            level: Option<String>,
        }
        let Ok(head) = serde_json::from_str::<Head<'_>>(notification.get()) else {
            return true;
        };
        if head.method != "notifications/message" {
            return true;
        }
        match self {
            LogFilter::Off => false,
            LogFilter::All => true,
            LogFilter::AtLeast(min) => {
                // A message with a level Junction cannot read is shown: dropping
                // it would hide the one thing the upstream wanted said.
                let level = head.params.and_then(|p| p.level);
                level
                    .as_deref()
                    .and_then(Level::parse)
                    .is_none_or(|l| l >= min)
            }
        }
    }
}

/// `logging/setLevel` of handshake-era sessions, by session key.
#[derive(Default)]
pub struct SessionLevels {
    levels: Mutex<HashMap<String, (Level, Instant)>>,
}

impl SessionLevels {
    /// Remembers `level` for the session until `ttl` after now. Refused when
    /// the table is full of live sessions.
    pub fn set(&self, session: &str, level: Level, ttl: Duration) -> Result<(), ()> {
        let mut levels = self.lock();
        let now = Instant::now();
        if !levels.contains_key(session) && levels.len() >= MAX_SESSIONS {
            levels.retain(|_, (_, until)| *until > now);
            if levels.len() >= MAX_SESSIONS {
                return Err(());
            }
        }
        levels.insert(session.to_owned(), (level, now + ttl));
        Ok(())
    }

    /// Sessions whose level has not expired (the expired are dropped here).
    pub fn live(&self) -> usize {
        let mut levels = self.lock();
        let now = Instant::now();
        levels.retain(|_, (_, until)| *until > now);
        levels.len()
    }

    /// The session's level, if it set one that has not expired.
    pub fn get(&self, session: &str) -> Option<Level> {
        let levels = self.lock();
        if levels.is_empty() {
            return None;
        }
        match levels.get(session) {
            Some((level, until)) if *until > Instant::now() => Some(*level),
            _ => None,
        }
    }

    /// Forgets the session's level (it ended).
    pub fn forget(&self, session: &str) {
        self.lock().remove(session);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Level, Instant)>> {
        self.levels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    fn log(level: &str) -> Box<RawValue> {
        raw(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"{level}","data":"x"}}}}"#
        ))
    }

    #[test]
    fn levels_order_by_severity_and_round_trip() {
        for name in Level::NAMES {
            assert_eq!(Level::parse(name).map(Level::name), Some(name));
        }
        assert!(Level::Debug < Level::Info && Level::Alert < Level::Emergency);
        assert_eq!(Level::parse("verbose"), None);
    }

    #[test]
    fn filters_only_log_messages_below_the_level() {
        let progress = raw(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#);
        let at_warning = LogFilter::AtLeast(Level::Warning);
        assert!(at_warning.passes(&log("error")));
        assert!(at_warning.passes(&log("warning")));
        assert!(!at_warning.passes(&log("info")));
        assert!(at_warning.passes(&progress));
        assert!(!LogFilter::Off.passes(&log("emergency")));
        assert!(LogFilter::Off.passes(&progress));
        assert!(LogFilter::All.passes(&log("debug")));
        assert!(at_warning.passes(&log("loud")), "unknown levels are shown");
    }

    #[test]
    fn session_levels_expire_and_are_bounded() {
        let s = SessionLevels::default();
        assert_eq!(s.get("a"), None);
        s.set("a", Level::Info, Duration::from_secs(60)).unwrap();
        assert_eq!(s.get("a"), Some(Level::Info));
        s.set("a", Level::Error, Duration::from_secs(60)).unwrap();
        assert_eq!(s.get("a"), Some(Level::Error));
        s.set("gone", Level::Info, Duration::ZERO).unwrap();
        assert_eq!(s.get("gone"), None);
        assert_eq!(s.live(), 1, "the expired entry is not counted");
        for i in 0..MAX_SESSIONS {
            let _ = s.set(&format!("s{i}"), Level::Debug, Duration::from_secs(60));
        }
        assert!(s
            .set("one-more", Level::Debug, Duration::from_secs(60))
            .is_err());
        assert_eq!(s.get("a"), Some(Level::Error), "a live entry survives");
        assert_eq!(s.live(), MAX_SESSIONS);
    }
}

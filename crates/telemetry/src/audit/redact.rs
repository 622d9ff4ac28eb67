//! Redaction: the values of named keys in arguments and results, never
//! written.

use serde_json::Value;

/// What a redacted value becomes.
pub const REDACTED: &str = "[redacted]";

/// Replaces the value of every object member named in `keys` (lower case;
/// compared ignoring case), at any depth and inside arrays, with
/// [`REDACTED`]. A redacted member's value is not looked into. Whether
/// anything was redacted.
pub fn redact(value: &mut Value, keys: &[String]) -> bool {
    let mut hit = false;
    match value {
        Value::Object(members) => {
            for (key, v) in members.iter_mut() {
                if keys.iter().any(|k| same_key(key, k)) {
                    *v = Value::String(REDACTED.to_owned());
                    hit = true;
                } else {
                    hit |= redact(v, keys);
                }
            }
        }
        Value::Array(items) => {
            for v in items {
                hit |= redact(v, keys);
            }
        }
        _ => {}
    }
    hit
}

/// [`redact`] for a tool result, and inside its text content blocks that
/// hold a JSON object or array too: MCP asks a tool that returns
/// `structuredContent` to repeat it as JSON text, which would otherwise
/// carry every redacted value. Such a block is written again, compactly,
/// only when something in it was redacted; other text is not searched.
pub fn redact_result(result: &mut Value, keys: &[String]) {
    redact(result, keys);
    let Some(Value::Array(blocks)) = result.get_mut("content") else {
        return;
    };
    for block in blocks {
        if block.get("type").and_then(Value::as_str) != Some("text") {
            continue;
        }
        let Some(Value::String(text)) = block.get_mut("text") else {
            continue;
        };
        if !text.trim_start().starts_with(['{', '[']) {
            continue;
        }
        if let Ok(mut inner) = serde_json::from_str::<Value>(text) {
            if redact(&mut inner, keys) {
                *text = inner.to_string();
            }
        }
    }
}

/// `key` is `lower` (already lower case) in any case.
fn same_key(key: &str, lower: &str) -> bool {
    if key.is_ascii() {
        key.eq_ignore_ascii_case(lower)
    } else {
        key.to_lowercase() == lower
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn redaction_hides_named_keys_in_any_case_at_any_depth() {
        let mut v = json!({
            "query": "weather",
            "Password": "hunter2",
            "nested": {"deeper": [{"API_KEY": {"inner": "x"}, "keep": 1}], "TOKEN": 5},
            "list": [[{"secret": null}]],
            "tokens": "not the same key",
            "ÜberSecret": "u",
        });
        redact(
            &mut v,
            &keys(&["password", "api_key", "token", "secret", "übersecret"]),
        );
        assert_eq!(
            v,
            json!({
                "query": "weather",
                "Password": "[redacted]",
                "nested": {"deeper": [{"API_KEY": "[redacted]", "keep": 1}], "TOKEN": "[redacted]"},
                "list": [[{"secret": "[redacted]"}]],
                "tokens": "not the same key",
                "ÜberSecret": "[redacted]",
            })
        );
        // Values are never matched, only keys; scalars are left alone.
        let mut s = json!(["password", "token"]);
        assert!(!redact(&mut s, &keys(&["password", "token"])));
        assert_eq!(s, json!(["password", "token"]));
        let mut nothing = json!({"password": "x"});
        assert!(!redact(&mut nothing, &[]));
        assert_eq!(nothing, json!({"password": "x"}));
    }

    #[test]
    fn a_result_is_redacted_in_its_structured_content_and_its_json_text_blocks() {
        let repeated = r#"{"user": "bob", "Token": "t-1", "items": [{"secret": 2}]}"#;
        let mut r = json!({
            "content": [
                {"type": "text", "text": repeated},
                {"type": "text", "text": "  [{\"token\": \"t-2\"}]"},
                {"type": "text", "text": "token: t-3 (plain text is not searched)"},
                {"type": "text", "text": "{\"user\": \"kept as sent\"}"},
                {"type": "image", "data": "{\"token\": 1}", "mimeType": "image/png"},
            ],
            "structuredContent": {"user": "bob", "Token": "t-1", "items": [{"secret": 2}]},
        });
        redact_result(&mut r, &keys(&["token", "secret"]));
        let text = |i: usize| {
            r["content"][i]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(
            serde_json::from_str::<Value>(&text(0)).unwrap_or_default(),
            json!({"user": "bob", "Token": "[redacted]", "items": [{"secret": "[redacted]"}]})
        );
        assert_eq!(text(1), r#"[{"token":"[redacted]"}]"#);
        assert_eq!(text(2), "token: t-3 (plain text is not searched)");
        assert_eq!(
            text(3),
            "{\"user\": \"kept as sent\"}",
            "unchanged, not rewritten"
        );
        assert_eq!(
            r["content"][4]["data"], "{\"token\": 1}",
            "only text blocks"
        );
        assert_eq!(r["structuredContent"]["Token"], "[redacted]");
        // Not a result object: only the plain redaction.
        let mut odd = json!([{"token": 1}]);
        redact_result(&mut odd, &keys(&["token"]));
        assert_eq!(odd, json!([{"token": "[redacted]"}]));
    }
}

//! `x-mcp-header` annotations (NOTES §5.6): validating a tool's inputSchema,
//! extracting header values from `arguments`, and checking received headers.
//!
//! An annotation counts only on a property reached from the root through
//! `properties` keys alone. Found anywhere else in the schema (under `items`,
//! `oneOf`, `$defs`, `additionalProperties`, …) it makes the tool invalid.
//! Instance data keywords (`enum`, `const`, `default`, `examples`) are not
//! schemas and are not searched.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::header_value::{self, as_integer, MAX_SAFE_INTEGER};

const KEYWORD: &str = "x-mcp-header";
const HEADER_PREFIX: &str = "Mcp-Param-";
/// serde_json already caps parse depth at 128; this guards hand-built values.
const MAX_DEPTH: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrimitiveKind {
    String,
    Integer,
    Boolean,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderParam {
    /// Annotation value, e.g. `Region`.
    pub name: String,
    /// Full header name, e.g. `Mcp-Param-Region`.
    pub header: String,
    /// Property names from the root to the annotated property.
    pub path: Vec<String>,
    pub kind: PrimitiveKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XMcpError {
    #[error("x-mcp-header at {pointer} is not statically reachable (only `properties` paths from the root are allowed)")]
    NotReachable { pointer: String },
    #[error("x-mcp-header at {pointer} is not a string")]
    NotAString { pointer: String },
    #[error("x-mcp-header at {pointer} is empty")]
    Empty { pointer: String },
    #[error("x-mcp-header {name:?} is not an RFC 9110 token")]
    NotToken { name: String },
    #[error("x-mcp-header {name:?} is used more than once (case-insensitively)")]
    Duplicate { name: String },
    #[error("x-mcp-header {name:?} is on a `number` property (only string, integer, boolean)")]
    NumberType { name: String },
    #[error("x-mcp-header {name:?} is on a property whose type is not string, integer or boolean")]
    NotPrimitive { name: String },
    #[error("inputSchema nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("argument for header {header} is not a {expected:?}")]
    WrongType {
        header: String,
        expected: PrimitiveKind,
    },
    #[error("integer argument for header {header} is outside ±(2^53-1)")]
    OutOfRange { header: String },
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn pointer(segments: &[String]) -> String {
    if segments.is_empty() {
        return "/".to_owned();
    }
    segments
        .iter()
        .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
        .collect()
}

struct Walker {
    out: Vec<HeaderParam>,
    seen: HashSet<String>,
    /// JSON pointer segments of the node being visited (for error messages).
    at: Vec<String>,
}

impl Walker {
    /// `props` is `Some(property path)` while the node is statically reachable.
    fn schema(&mut self, node: &Value, props: Option<&mut Vec<String>>) -> Result<(), XMcpError> {
        if self.at.len() > MAX_DEPTH {
            return Err(XMcpError::TooDeep);
        }
        match node {
            Value::Object(obj) => self.object(obj, props),
            // Only old-style tuple `items: [...]` puts schemas in arrays we walk as a schema.
            Value::Array(items) => self.each(items),
            _ => Ok(()),
        }
    }

    fn each(&mut self, items: &[Value]) -> Result<(), XMcpError> {
        for (i, item) in items.iter().enumerate() {
            self.at.push(i.to_string());
            let r = self.schema(item, None);
            self.at.pop();
            r?;
        }
        Ok(())
    }

    fn object(
        &mut self,
        obj: &Map<String, Value>,
        mut props: Option<&mut Vec<String>>,
    ) -> Result<(), XMcpError> {
        if let Some(annotation) = obj.get(KEYWORD) {
            self.at.push(KEYWORD.to_owned());
            let r = match props.as_deref() {
                Some(path) => self.annotation(annotation, obj, path),
                None => Err(XMcpError::NotReachable {
                    pointer: pointer(&self.at),
                }),
            };
            self.at.pop();
            r?;
        }
        for (key, value) in obj {
            self.at.push(key.clone());
            let r = match key.as_str() {
                KEYWORD | "enum" | "const" | "default" | "examples" => Ok(()),
                "properties" => match value.as_object() {
                    Some(map) => self.properties(map, props.as_deref_mut()),
                    None => Ok(()),
                },
                // Maps of name -> schema: member names are not keywords.
                "$defs" | "definitions" | "patternProperties" | "dependentSchemas"
                | "dependencies" => match value.as_object() {
                    Some(map) => self.properties(map, None),
                    None => Ok(()),
                },
                // Every other keyword (known or vendor) may hold subschemas; none of
                // them are statically reachable. Each node is visited once.
                _ => self.schema(value, None),
            };
            self.at.pop();
            r?;
        }
        Ok(())
    }

    fn properties(
        &mut self,
        map: &Map<String, Value>,
        mut props: Option<&mut Vec<String>>,
    ) -> Result<(), XMcpError> {
        for (name, sub) in map {
            self.at.push(name.clone());
            let r = match props.as_deref_mut() {
                Some(path) => {
                    path.push(name.clone());
                    let r = self.schema(sub, Some(path));
                    path.pop();
                    r
                }
                None => self.schema(sub, None),
            };
            self.at.pop();
            r?;
        }
        Ok(())
    }

    fn annotation(
        &mut self,
        annotation: &Value,
        property: &Map<String, Value>,
        path: &[String],
    ) -> Result<(), XMcpError> {
        let name = annotation.as_str().ok_or_else(|| XMcpError::NotAString {
            pointer: pointer(&self.at),
        })?;
        if name.is_empty() {
            return Err(XMcpError::Empty {
                pointer: pointer(&self.at),
            });
        }
        if !name.bytes().all(is_tchar) {
            return Err(XMcpError::NotToken { name: name.into() });
        }
        let kind = match property.get("type").and_then(Value::as_str) {
            Some("string") => PrimitiveKind::String,
            Some("integer") => PrimitiveKind::Integer,
            Some("boolean") => PrimitiveKind::Boolean,
            Some("number") => return Err(XMcpError::NumberType { name: name.into() }),
            _ => return Err(XMcpError::NotPrimitive { name: name.into() }),
        };
        if path.is_empty() {
            // The root itself is the arguments object, never a primitive.
            return Err(XMcpError::NotPrimitive { name: name.into() });
        }
        if !self.seen.insert(name.to_ascii_lowercase()) {
            return Err(XMcpError::Duplicate { name: name.into() });
        }
        self.out.push(HeaderParam {
            name: name.to_owned(),
            header: format!("{HEADER_PREFIX}{name}"),
            path: path.to_vec(),
            kind,
        });
        Ok(())
    }
}

/// All annotations of a tool's inputSchema, validated, in schema order
/// (property names sorted); `Err` names the first broken rule found.
pub fn header_params(input_schema: &Value) -> Result<Vec<HeaderParam>, XMcpError> {
    let mut walker = Walker {
        out: Vec::new(),
        seen: HashSet::new(),
        at: Vec::new(),
    };
    let mut path = Vec::new();
    walker.schema(input_schema, Some(&mut path))?;
    Ok(walker.out)
}

/// The value at the annotated path; absent, `null`, or a non-object on the way
/// all mean "no value" (the header is omitted).
fn lookup<'a>(arguments: Option<&'a Value>, path: &[String]) -> Option<&'a Value> {
    let mut cur = arguments?;
    for key in path {
        cur = cur.as_object()?.get(key)?;
    }
    (!cur.is_null()).then_some(cur)
}

fn header_text(param: &HeaderParam, v: &Value) -> Result<String, XMcpError> {
    let wrong = || XMcpError::WrongType {
        header: param.header.clone(),
        expected: param.kind,
    };
    match (param.kind, v) {
        (PrimitiveKind::String, Value::String(s)) => Ok(s.clone()),
        (PrimitiveKind::Boolean, Value::Bool(b)) => Ok(b.to_string()),
        (PrimitiveKind::Integer, Value::Number(n)) => {
            let out_of_range = || XMcpError::OutOfRange {
                header: param.header.clone(),
            };
            let i = match as_integer(v) {
                Some(i) => i,
                // Integral but too big for an exact float, or a fraction.
                None if n.as_f64().is_some_and(|f| f.fract() == 0.0) => return Err(out_of_range()),
                None => return Err(wrong()),
            };
            if i.abs() > i128::from(MAX_SAFE_INTEGER) {
                return Err(out_of_range());
            }
            Ok(i.to_string())
        }
        _ => Err(wrong()),
    }
}

/// `(header name, encoded value)` for each annotated argument present and non-null.
pub fn extract(
    params: &[HeaderParam],
    arguments: Option<&Value>,
) -> Result<Vec<(String, String)>, XMcpError> {
    let mut out = Vec::with_capacity(params.len());
    for p in params {
        if let Some(v) = lookup(arguments, &p.path) {
            out.push((
                p.header.clone(),
                header_value::encode(&header_text(p, v)?).into_owned(),
            ));
        }
    }
    Ok(out)
}

/// Downstream check of received headers against the body. `received` holds every
/// incoming `Mcp-Param-*` header (name as received, raw value). Names compare
/// case-insensitively; headers for names the tool does not annotate are ignored
/// (intermediaries must forward unknown ones). A missing header for a present
/// value, a header for an absent/null value, a repeated header, an undecodable
/// value or a mismatch after decoding (integers numerically) is `Err(reason)`.
pub fn check(
    params: &[HeaderParam],
    arguments: Option<&Value>,
    received: &[(String, String)],
) -> Result<(), String> {
    for p in params {
        let mut found = received
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case(&p.header));
        let header = found.next();
        if found.next().is_some() {
            return Err(format!("header {} appears more than once", p.header));
        }
        match (lookup(arguments, &p.path), header) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(format!(
                    "header {} sent but its argument is absent or null",
                    p.header
                ))
            }
            (Some(_), None) => return Err(format!("header {} is missing", p.header)),
            (Some(body), Some((_, raw))) => {
                let decoded =
                    header_value::decode(raw).map_err(|e| format!("header {}: {e}", p.header))?;
                if !header_value::matches(&decoded, body) {
                    return Err(format!(
                        "header {} does not match the request body",
                        p.header
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "xmcp_tests.rs"]
mod tests;

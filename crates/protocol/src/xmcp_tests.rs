use super::*;
use serde_json::json;

/// The NOTES §5.6 example tool.
fn db_query() -> Value {
    json!({"type":"object",
      "properties":{"target":{"type":"object","properties":{
          "region":{"type":"string","x-mcp-header":"Region"}}},
        "dryRun":{"type":"boolean","x-mcp-header":"Dry-Run"},
        "sql":{"type":"string"}},"required":["sql"]})
}

fn err(schema: Value) -> XMcpError {
    match header_params(&schema) {
        Ok(p) => panic!("expected invalid, got {p:?} for {schema}"),
        Err(e) => e,
    }
}

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn notes_example_is_valid_and_extracts() {
    let params = header_params(&db_query()).expect("valid");
    assert_eq!(
        params,
        vec![
            HeaderParam {
                name: "Dry-Run".into(),
                header: "Mcp-Param-Dry-Run".into(),
                path: vec!["dryRun".into()],
                kind: PrimitiveKind::Boolean,
            },
            HeaderParam {
                name: "Region".into(),
                header: "Mcp-Param-Region".into(),
                path: vec!["target".into(), "region".into()],
                kind: PrimitiveKind::String,
            },
        ]
    );
    let args = json!({"target":{"region":"eu-1"},"dryRun":false,"sql":"select 1"});
    let mut got = extract(&params, Some(&args)).expect("extract");
    got.sort();
    assert_eq!(
        got,
        headers(&[("Mcp-Param-Dry-Run", "false"), ("Mcp-Param-Region", "eu-1")])
    );
}

#[test]
fn no_annotations_means_no_params() {
    assert_eq!(header_params(&json!({"type":"object"})), Ok(vec![]));
    assert_eq!(header_params(&json!(true)), Ok(vec![]));
    // A *property named* x-mcp-header is not an annotation.
    let s = json!({"type":"object","properties":{"x-mcp-header":{"type":"string"}}});
    assert_eq!(header_params(&s), Ok(vec![]));
    // Data keywords are instances, not schemas.
    let s = json!({"type":"object","properties":{"a":{"type":"object",
        "default":{"x-mcp-header":"A"},"examples":[{"x-mcp-header":"B"}],
        "enum":[{"x-mcp-header":"C"}],"const":{"x-mcp-header":"D"}}}});
    assert_eq!(header_params(&s), Ok(vec![]));
}

#[test]
fn integer_and_ref_siblings_are_allowed() {
    let s = json!({"type":"object","properties":{
        "n":{"type":"integer","x-mcp-header":"N","minimum":0},
        "t":{"type":"string","x-mcp-header":"Tenant!#$%&'*+.^_`|~9"}}});
    let p = header_params(&s).expect("valid");
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].kind, PrimitiveKind::Integer);
}

#[test]
fn unreachable_locations_invalidate_the_tool() {
    let leaf = json!({"type":"string","x-mcp-header":"Region"});
    let cases = [
        json!({"type":"object","properties":{"list":{"type":"array","items":leaf}}}),
        json!({"type":"object","properties":{"list":{"type":"array","items":[leaf]}}}),
        json!({"type":"object","properties":{"t":{"type":"array","prefixItems":[leaf]}}}),
        json!({"type":"object","properties":{"c":{"type":"array","contains":leaf}}}),
        json!({"type":"object","oneOf":[{"properties":{"r":leaf}}]}),
        json!({"type":"object","anyOf":[{"properties":{"r":leaf}}]}),
        json!({"type":"object","allOf":[{"properties":{"r":leaf}}]}),
        json!({"type":"object","properties":{"r":{"not":leaf}}}),
        json!({"type":"object","if":{"properties":{"r":leaf}}}),
        json!({"type":"object","then":{"properties":{"r":leaf}}}),
        json!({"type":"object","else":{"properties":{"r":leaf}}}),
        json!({"type":"object","properties":{"r":{"$ref":"#/$defs/R"}},"$defs":{"R":leaf}}),
        json!({"type":"object","definitions":{"R":leaf}}),
        json!({"type":"object","additionalProperties":leaf}),
        json!({"type":"object","unevaluatedProperties":leaf}),
        json!({"type":"object","patternProperties":{"^r":leaf}}),
        json!({"type":"object","dependentSchemas":{"a":{"properties":{"r":leaf}}}}),
        json!({"type":"object","propertyNames":leaf}),
        json!({"type":"object","x-vendor":{"deep":{"properties":{"r":leaf}}}}),
        // x-mcp-header at the root: reachable but not a primitive property
        json!({"type":"object","x-mcp-header":"Root"}),
    ];
    for schema in cases {
        let e = err(schema.clone());
        assert!(
            matches!(
                e,
                XMcpError::NotReachable { .. } | XMcpError::NotPrimitive { .. }
            ),
            "{schema}: {e}"
        );
    }
    let e = err(json!({"type":"object","properties":{"list":{"type":"array","items":leaf}}}));
    assert_eq!(
        e,
        XMcpError::NotReachable {
            pointer: "/properties/list/items/x-mcp-header".into()
        }
    );
}

#[test]
fn number_type_is_invalid() {
    let e = err(json!({"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}));
    assert_eq!(e, XMcpError::NumberType { name: "N".into() });
}

#[test]
fn non_primitive_or_missing_type_is_invalid() {
    for t in [
        json!("object"),
        json!("array"),
        json!("null"),
        json!(["string", "null"]),
    ] {
        let e = err(json!({"type":"object","properties":{"v":{"type":t,"x-mcp-header":"V"}}}));
        assert_eq!(e, XMcpError::NotPrimitive { name: "V".into() });
    }
    let e = err(json!({"type":"object","properties":{"v":{"x-mcp-header":"V"}}}));
    assert_eq!(e, XMcpError::NotPrimitive { name: "V".into() });
}

#[test]
fn duplicate_names_case_insensitive() {
    let e = err(json!({"type":"object","properties":{
        "a":{"type":"string","x-mcp-header":"region"},
        "b":{"type":"object","properties":{"c":{"type":"string","x-mcp-header":"REGION"}}}}}));
    assert!(matches!(e, XMcpError::Duplicate { .. }), "{e}");
}

#[test]
fn non_token_and_empty_and_non_string_values() {
    for bad in [
        "Re gion", "Région", "a:b", "a/b", "a\r\nb", "(x)", "a\"b", "a\tb",
    ] {
        let e =
            err(json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":bad}}}));
        assert_eq!(e, XMcpError::NotToken { name: bad.into() }, "{bad:?}");
    }
    let e = err(json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}));
    assert!(matches!(e, XMcpError::Empty { .. }));
    for v in [
        json!(1),
        json!(true),
        json!(null),
        json!(["A"]),
        json!({"n":"A"}),
    ] {
        let e = err(json!({"type":"object","properties":{"a":{"type":"string","x-mcp-header":v}}}));
        assert!(matches!(e, XMcpError::NotAString { .. }), "{e}");
    }
}

#[test]
fn defs_members_named_like_keywords_are_still_schemas() {
    let leaf = json!({"type":"string","x-mcp-header":"Region"});
    for name in ["enum", "const", "default", "examples", "properties"] {
        let e = err(json!({"type":"object","$defs":{name: leaf}}));
        assert!(matches!(e, XMcpError::NotReachable { .. }), "{name}: {e}");
    }
}

#[test]
fn deep_composition_is_walked_once_per_node() {
    // An exponential walk would never finish on this.
    let mut s = json!({"type":"string"});
    for _ in 0..100 {
        s = json!({"not": s, "allOf": [{"if": {"type":"object"}}]});
    }
    let s = json!({"type":"object","properties":{"a":s}});
    assert_eq!(header_params(&s), Ok(vec![]));
}

#[test]
fn too_deep_is_an_error_not_a_crash() {
    let mut s = json!({"type":"string","x-mcp-header":"D"});
    for _ in 0..400 {
        s = json!({"type":"object","properties":{"p":s}});
    }
    assert_eq!(header_params(&s), Err(XMcpError::TooDeep));
}

fn one(kind: &str) -> Vec<HeaderParam> {
    header_params(&json!({"type":"object","properties":{"v":{"type":kind,"x-mcp-header":"V"}}}))
        .expect("valid")
}

#[test]
fn extract_rules() {
    let s = one("string");
    assert_eq!(extract(&s, None), Ok(vec![]));
    assert_eq!(extract(&s, Some(&json!({}))), Ok(vec![]));
    assert_eq!(extract(&s, Some(&json!({"v":null}))), Ok(vec![]));
    assert_eq!(
        extract(&s, Some(&json!({"v":"Zürich"}))),
        Ok(headers(&[("Mcp-Param-V", "=?base64?WsO8cmljaA==?=")]))
    );
    assert!(matches!(
        extract(&s, Some(&json!({"v":5}))),
        Err(XMcpError::WrongType { .. })
    ));

    let i = one("integer");
    assert_eq!(
        extract(&i, Some(&json!({"v":42.0}))),
        Ok(headers(&[("Mcp-Param-V", "42")]))
    );
    assert_eq!(
        extract(&i, Some(&json!({"v":9007199254740991_i64}))),
        Ok(headers(&[("Mcp-Param-V", "9007199254740991")]))
    );
    for big in [
        json!(9007199254740992_i64),
        json!(-9007199254740992_i64),
        json!(u64::MAX),
        json!(1e300),
    ] {
        assert!(
            matches!(
                extract(&i, Some(&json!({"v":big}))),
                Err(XMcpError::OutOfRange { .. })
            ),
            "{big}"
        );
    }
    assert!(matches!(
        extract(&i, Some(&json!({"v":1.5}))),
        Err(XMcpError::WrongType { .. })
    ));
    assert!(matches!(
        extract(&i, Some(&json!({"v":"1"}))),
        Err(XMcpError::WrongType { .. })
    ));

    let b = one("boolean");
    assert_eq!(
        extract(&b, Some(&json!({"v":true}))),
        Ok(headers(&[("Mcp-Param-V", "true")]))
    );
    assert!(matches!(
        extract(&b, Some(&json!({"v":"true"}))),
        Err(XMcpError::WrongType { .. })
    ));

    // nested: a missing or null parent means no header
    let p = header_params(&db_query()).expect("valid");
    assert_eq!(extract(&p, Some(&json!({"target":null}))), Ok(vec![]));
    assert_eq!(extract(&p, Some(&json!({"target":{}}))), Ok(vec![]));
}

#[test]
fn check_accepts_matching_headers() {
    let p = header_params(&db_query()).expect("valid");
    let args = json!({"target":{"region":"eu-1"},"dryRun":false});
    let ok = headers(&[("mcp-param-region", "eu-1"), ("MCP-PARAM-DRY-RUN", "false")]);
    assert_eq!(check(&p, Some(&args), &ok), Ok(()));
    // base64-encoded but equal after decoding
    let enc = headers(&[
        ("Mcp-Param-Region", "=?base64?ZXUtMQ==?="),
        ("Mcp-Param-Dry-Run", "false"),
    ]);
    assert_eq!(check(&p, Some(&args), &enc), Ok(()));
    // unknown Mcp-Param-* headers are not ours to judge
    let extra = headers(&[
        ("Mcp-Param-Region", "eu-1"),
        ("Mcp-Param-Dry-Run", "false"),
        ("Mcp-Param-Other", "x"),
    ]);
    assert_eq!(check(&p, Some(&args), &extra), Ok(()));
    // absent and null values need no header
    assert_eq!(check(&p, Some(&json!({"dryRun":null})), &[]), Ok(()));
    assert_eq!(check(&p, None, &[]), Ok(()));
    // integers compare numerically
    let i = one("integer");
    assert_eq!(
        check(
            &i,
            Some(&json!({"v":42.0})),
            &headers(&[("Mcp-Param-V", "42")])
        ),
        Ok(())
    );
}

#[test]
fn check_rejects_each_failure() {
    let p = header_params(&db_query()).expect("valid");
    let args = json!({"target":{"region":"eu-1"},"dryRun":false});
    let cases: [&[(&str, &str)]; 6] = [
        &[("Mcp-Param-Dry-Run", "false")], // missing
        &[("Mcp-Param-Region", "eu-2"), ("Mcp-Param-Dry-Run", "false")], // mismatch
        &[("Mcp-Param-Region", "EU-1"), ("Mcp-Param-Dry-Run", "false")], // case-sensitive value
        &[("Mcp-Param-Region", "eu-1"), ("Mcp-Param-Dry-Run", "0")], // bool spelling
        &[
            ("Mcp-Param-Region", "=?base64?***?="),
            ("Mcp-Param-Dry-Run", "false"),
        ], // undecodable
        &[
            ("Mcp-Param-Region", "eu-1"),
            ("mcp-param-region", "eu-1"),
            ("Mcp-Param-Dry-Run", "false"),
        ], // repeated
    ];
    for h in cases {
        assert!(check(&p, Some(&args), &headers(h)).is_err(), "{h:?}");
    }
    // header sent for an absent / null value
    let h = headers(&[("Mcp-Param-Dry-Run", "false")]);
    assert!(check(&p, Some(&json!({"dryRun":null})), &h).is_err());
    assert!(check(&p, None, &h).is_err());
    // invalid characters in a plain value
    let s = one("string");
    assert!(check(
        &s,
        Some(&json!({"v":"a\nb"})),
        &headers(&[("Mcp-Param-V", "a\nb")])
    )
    .is_err());
}

use super::*;
use proptest::prelude::*;

fn parse(s: &str) -> Result<ClientMessage<'_>, RpcError> {
    parse_client_message(s.as_bytes())
}

fn code(s: &str) -> i64 {
    match parse(s) {
        Ok(m) => panic!("expected an error for {s}, got {m:?}"),
        Err(e) => e.code,
    }
}

#[test]
fn request_keeps_params_raw() {
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__b","arguments":{"x": 1.50, "y":"\u00e9"}}}"#;
    match parse(body) {
        Ok(ClientMessage::Request { id, method, params }) => {
            assert_eq!(id, Id::Num(7));
            assert_eq!(method, "tools/call");
            let params = params.expect("params");
            assert_eq!(params["name"].get(), r#""a__b""#);
            // byte for byte: number formatting and escapes untouched
            assert_eq!(params["arguments"].get(), r#"{"x": 1.50, "y":"\u00e9"}"#);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn params_borrow_the_message_and_decode_escaped_keys() {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","na\u006de2":"u","arguments":{}}}"#;
    let Ok(ClientMessage::Request { params, .. }) = parse(body) else {
        panic!("expected a request");
    };
    let params = params.expect("params");
    // Keys and values point into the body; the escaped key is decoded.
    for (k, v) in &params {
        let value_in_body = body.as_bytes().as_ptr_range().contains(&v.get().as_ptr());
        assert!(value_in_body, "value of {k} was copied");
        assert_eq!(matches!(k, Cow::Borrowed(_)), k != "name2", "{k}");
    }
    assert_eq!(params["name2"].get(), r#""u""#);
    // A duplicate spelled with an escape is still a duplicate.
    let dup = parse(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"k":1,"\u006b":2}}"#);
    assert!(dup.unwrap_err().message.contains(r#"duplicate key "k""#));
}

#[test]
fn string_ids_notifications_and_absent_params() {
    match parse(r#"{"jsonrpc":"2.0","id":"r-1","method":"ping"}"#) {
        Ok(ClientMessage::Request { id, params, .. }) => {
            assert_eq!(id, Id::Str("r-1".into()));
            assert!(params.is_none());
        }
        other => panic!("unexpected {other:?}"),
    }
    match parse(" {\"method\":\"notifications/initialized\",\"jsonrpc\":\"2.0\",\"params\":{}}\n") {
        Ok(ClientMessage::Notification { method, params }) => {
            assert_eq!(method, "notifications/initialized");
            assert_eq!(params.map(|p| p.len()), Some(0));
        }
        other => panic!("unexpected {other:?}"),
    }
    let m = parse(r#"{"jsonrpc":"2.0","id":-3,"method":"x","extra":[1]}"#).expect("ok");
    assert_eq!(m.id(), Some(&Id::Num(-3)));
    assert_eq!(m.method(), "x");
}

#[test]
fn bad_messages_get_the_right_code() {
    let parse_errors = [
        "",
        "   ",
        "{",
        r#"{"jsonrpc":"2.0","id":1,"method":"x"} trailing"#,
        "{'jsonrpc':'2.0'}",
        // Broken after a duplicate params key: still a parse error.
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1,"a":2,"b":}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1,}"#,
    ];
    for s in parse_errors {
        assert_eq!(code(s), codes::PARSE_ERROR, "{s:?}");
    }
    assert_eq!(
        parse_client_message(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}")
            .map_err(|e| e.code)
            .err(),
        Some(codes::PARSE_ERROR)
    );

    let invalid_requests = [
        r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#,
        r#"[]"#,
        r#""just a string""#,
        "42",
        "null",
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","result":null}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":1.0,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":1e3,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":[1],"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":99999999999999999999,"method":"x"}"#,
        r#"{"id":1,"method":"x"}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
        r#"{"jsonrpc":2.0,"id":1,"method":"x"}"#,
        r#"{"jsonrpc":null,"id":1,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":""}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1,2]}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":"p"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","method":"y"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1,"a":2}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":{"b":[1]},"c":2,"a":{},"d":[{}]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":7}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":-7.5}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":true}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[{"a":1}]}"#,
    ];
    for s in invalid_requests {
        assert_eq!(code(s), codes::INVALID_REQUEST, "{s}");
    }
    let dup = parse(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"k":1,"k":2}}"#);
    assert!(dup.unwrap_err().message.contains(r#"duplicate key "k""#));
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("builder output must be valid JSON")
}

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_owned()).expect("raw")
}

#[test]
fn builders_produce_valid_json() {
    let tricky = Id::Str("a\"b\\c\n\u{7}é".into());
    let v = json(&result_bytes(&tricky, &raw(r#"{"ok":true}"#)));
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], "a\"b\\c\n\u{7}é");
    assert_eq!(v["result"]["ok"], true);

    let err = RpcError::new(codes::INVALID_PARAMS, "bad \"cursor\"")
        .with_data(serde_json::json!({"origin":"gateway"}));
    let v = json(&error_bytes(Some(&Id::Num(i64::MIN)), &err));
    assert_eq!(v["id"], i64::MIN);
    assert_eq!(v["error"]["code"], -32602);
    assert_eq!(v["error"]["message"], "bad \"cursor\"");
    assert_eq!(v["error"]["data"]["origin"], "gateway");

    let v = json(&error_bytes(None, &RpcError::new(codes::PARSE_ERROR, "x")));
    assert!(v.get("id").is_none());
    assert!(v["error"].get("data").is_none());

    let v = json(&notification_bytes("notifications/\"x\"", &raw("{}")));
    assert_eq!(v["method"], "notifications/\"x\"");
    assert!(v.get("id").is_none());

    let v = json(&request_bytes(
        &Id::Num(5),
        "tools/call",
        &raw(r#"{"name":"t"}"#),
    ));
    assert_eq!(v["id"], 5);
    assert_eq!(v["method"], "tools/call");
    assert_eq!(v["params"]["name"], "t");
}

#[test]
fn raw_object_keeps_order_and_bytes() {
    let args = raw(r#"{"b": 1.0, "a": 2}"#);
    let name = raw(r#""t""#);
    let obj = raw_object([("name", &*name), ("arguments", &*args), ("we\"ird", &*name)]);
    assert_eq!(
        obj.get(),
        r#"{"name":"t","arguments":{"b": 1.0, "a": 2},"we\"ird":"t"}"#
    );
    assert_eq!(raw_object([]).get(), "{}");
}

#[test]
fn server_messages_parse_all_shapes() {
    let r = ServerMessage::parse(r#"{"jsonrpc":"2.0","id":"g-1","result":{"a":[1]}}"#).expect("ok");
    assert_eq!(r.id, Some(Id::Str("g-1".into())));
    assert_eq!(r.result.as_deref().map(RawValue::get), Some(r#"{"a":[1]}"#));
    assert!(r.is_response());
    let e = ServerMessage::parse(
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}}"#,
    )
    .expect("ok");
    assert_eq!(e.id, None);
    assert_eq!(e.error.map(|e| e.code), Some(-32700));
    let n = ServerMessage::parse(
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"p":1}}"#,
    )
    .expect("ok");
    assert!(!n.is_response());
    assert_eq!(n.method.as_deref(), Some("notifications/progress"));
}

#[test]
fn id_serializes_untagged() {
    assert_eq!(
        serde_json::to_string(&Id::Num(3)).ok().as_deref(),
        Some("3")
    );
    assert_eq!(
        serde_json::to_string(&Id::from("x")).ok().as_deref(),
        Some("\"x\"")
    );
    assert_eq!(Id::Num(3).to_string(), "3");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    // Raw values are skimmed without recursion, so depth costs no stack here;
    // whoever later parses a raw member into a Value meets serde_json's depth limit.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(
        parse(&deep).map_err(|e| e.code).err(),
        Some(codes::INVALID_REQUEST)
    );
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"a":{deep}}}}}"#);
    let m = parse(&body).expect("raw members are kept, however deep");
    assert_eq!(m.params().map(|p| p["a"].get().len()), Some(200_000));
    let unbalanced = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"a":{}}}}}"#,
        "[".repeat(100_000)
    );
    assert_eq!(
        parse(&unbalanced).map_err(|e| e.code).err(),
        Some(codes::PARSE_ERROR)
    );
}

#[test]
fn escaped_envelope_strings_are_decoded() {
    let m = parse(r#"{"jsonrpc":"2.0","id":"A","method":"tools\/list"}"#).expect("ok");
    assert_eq!(m.id(), Some(&Id::Str("A".into())));
    assert_eq!(m.method(), "tools/list");
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_client_message(&bytes);
    }

    #[test]
    fn arbitrary_json_text_never_panics(s in r#"[{}\[\]":,0-9a-z.\-eE\\ ]{0,80}"#) {
        let wrapped = format!(r#"{{"jsonrpc":"2.0","id":{s},"method":"m","params":{s}}}"#);
        let _ = parse_client_message(wrapped.as_bytes());
        let _ = parse_client_message(s.as_bytes());
    }

    #[test]
    fn string_ids_round_trip_through_builders(s in any::<String>(), n in any::<i64>()) {
        for id in [Id::Str(s.clone()), Id::Num(n)] {
            let bytes = request_bytes(&id, "m", &raw("{}"));
            match parse_client_message(&bytes) {
                Ok(ClientMessage::Request { id: back, .. }) => prop_assert_eq!(back, id),
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }

    /// The builders copy plain strings between quotes instead of running
    /// serde_json's writer; the bytes must be exactly serde_json's, for plain
    /// strings and for those with quotes, backslashes and control characters.
    #[test]
    fn builders_write_strings_and_ids_as_serde_json_does(
        s in prop_oneof![any::<String>(), r#"[a-z"\\\x00-\x1f\x7f/é]{0,12}"#],
        n in any::<i64>(),
    ) {
        let quoted = serde_json::to_string(&s).unwrap_or_default();
        let mut obj = Vec::new();
        write_object(&mut obj, [(s.as_str(), "1")]);
        prop_assert_eq!(String::from_utf8_lossy(&obj), format!("{{{quoted}:1}}"));
        for id in [Id::Str(s.clone()), Id::Num(n)] {
            let id_json = serde_json::to_string(&id).unwrap_or_default();
            let bytes = request_bytes(&id, &s, &raw("{}"));
            let want = format!(r#"{{"jsonrpc":"2.0","id":{id_json},"method":{quoted},"params":{{}}}}"#);
            prop_assert_eq!(String::from_utf8_lossy(&bytes), want);
            let result = result_bytes(&id, &raw("2"));
            prop_assert_eq!(
                String::from_utf8_lossy(&result),
                format!(r#"{{"jsonrpc":"2.0","id":{id_json},"result":2}}"#)
            );
        }
    }
}

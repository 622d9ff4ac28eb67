//! The status page in a real browser: Debian's headless `chromium` (`.ci/run`
//! installs it; this test fails, never skips, without it) opens the page with
//! the token as `?token=` (a browser cannot send the header from the command
//! line), dumps the DOM, and takes a 1280×900 screenshot. Set
//! `JUNCTION_STATUS_SCREENSHOT=<file>` to keep a copy of the PNG (that is how
//! `docs/status-page.png` is made).

use std::path::{Path, PathBuf};
use std::time::Duration;

use junction_testkit::{spawn_gateway_with_env, TestClient};
use serde_json::json;

use super::{bin, config, mocks, report_until, upstream, TOKEN};

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 900;

fn chromium() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("chromium is not on PATH: `apt-get install -y chromium` (.ci/run does)")
        })
}

/// Runs headless Chromium with `args` then `url`; its stdout.
async fn run_chromium(profile: &Path, args: &[&str], url: &str) -> String {
    let mut cmd = tokio::process::Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-extensions",
        "--disable-sync",
        "--force-device-scale-factor=1",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .arg(url)
    .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("chromium finished within 90 s")
        .expect("chromium ran");
    assert!(
        out.status.success(),
        "chromium {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The visible text of an HTML fragment: tags dropped, entities of `esc`
/// decoded, whitespace collapsed.
fn text(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text of the table row whose first cell names `id`.
fn row(dom: &str, id: &str) -> String {
    let start = format!("<b>{id}</b>");
    dom.split("<tr")
        .find(|r| r.contains(&start))
        .map(text)
        .unwrap_or_else(|| panic!("no row for {id} in the DOM:\n{dom}"))
}

/// (width, height) from the IHDR chunk, and the bytes of all IDAT chunks.
fn png(bytes: &[u8]) -> ((u32, u32), Vec<u8>) {
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG ({} bytes)",
        bytes.len()
    );
    let mut at = 8;
    let (mut size, mut data) = (None, Vec::new());
    while at + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let kind = &bytes[at + 4..at + 8];
        let body = &bytes[at + 8..(at + 8 + len).min(bytes.len())];
        match kind {
            b"IHDR" => {
                let be = |i: usize| u32::from_be_bytes(body[i..i + 4].try_into().expect("4 bytes"));
                size = Some((be(0), be(4)));
            }
            b"IDAT" => data.extend_from_slice(body),
            b"IEND" => break,
            _ => {}
        }
        at += 12 + len; // length, type, body, CRC
    }
    (size.expect("an IHDR chunk"), data)
}

#[tokio::test]
async fn a_browser_shows_who_is_up_who_is_down_and_the_tools() {
    let (alpha, notes) = mocks().await;
    let yaml = config(
        &alpha.url,
        &notes.url,
        "status: {enabled: true, token_env: STATUS_TOKEN}\n",
    );
    let gw = spawn_gateway_with_env(bin(), &yaml, &[("STATUS_TOKEN", TOKEN)]).await;
    let c = TestClient::modern(&gw.url("/mcp"));
    let call = c.call_tool("alpha__get_customer", json!({"id": 7})).await;
    assert!(call.error().is_none(), "{:?}", call.body);
    report_until(&gw, |r| {
        upstream(r, "alpha")["health"] == "up" && upstream(r, "ghost")["health"] == "down"
    })
    .await;
    let url = gw.url(&format!("/status?token={TOKEN}"));
    let profile = gw.dir().join("chromium-profile");

    let dom = run_chromium(&profile, &["--dump-dom"], &url).await;
    let alpha_row = row(&dom, "alpha");
    assert!(alpha_row.contains(" up "), "{alpha_row}");
    assert!(alpha_row.contains("modern"), "{alpha_row}");
    let notes_row = row(&dom, "notes");
    assert!(
        notes_row.contains(" up ") && notes_row.contains("legacy"),
        "{notes_row}"
    );
    let ghost_row = row(&dom, "ghost");
    assert!(ghost_row.contains(" down "), "{ghost_row}");
    assert!(ghost_row.contains("upstream unavailable"), "{ghost_row}");
    let page = text(&dom);
    for name in [
        "alpha__get_customer",
        "alpha__search_customers",
        "notes__add_note",
        "per-user-tool",
    ] {
        assert!(page.contains(name), "{name} not on the page:\n{page}");
    }
    assert!(!page.contains("hunter2"), "a URL's query never shows");

    let shot = gw.dir().join("status.png");
    run_chromium(
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("--window-size={WIDTH},{HEIGHT}"),
        ],
        &url,
    )
    .await;
    let bytes = std::fs::read(&shot).expect("the screenshot was written");
    let ((w, h), data) = png(&bytes);
    assert_eq!((w, h), (WIDTH, HEIGHT));
    // A blank page compresses to a few KiB of near-constant bytes; text,
    // tables and badges do not.
    let mut seen = [false; 256];
    data.iter().for_each(|b| seen[*b as usize] = true);
    let distinct = seen.iter().filter(|s| **s).count();
    assert!(
        data.len() > 20_000 && distinct > 200,
        "the screenshot looks blank: {} bytes of image data, {distinct} distinct byte values",
        data.len()
    );
    if let Some(keep) = std::env::var_os("JUNCTION_STATUS_SCREENSHOT") {
        std::fs::copy(&shot, &keep).expect("copy the screenshot");
    }
}

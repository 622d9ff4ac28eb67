//! Reading a child's output line by line with a cap: stdout lines for the
//! reader of `proc.rs`, stderr lines into the log.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

const MAX_STDERR_LINE: usize = 8 * 1024;

pub(super) enum Line {
    Text(Vec<u8>),
    TooLong,
}

/// Newline-delimited reading with a cap, so a child cannot make us buffer
/// without bound; an overlong line is skipped whole.
pub(super) async fn read_line<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    max: usize,
) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Some(Line::TooLong),
                (false, true) => None,
                (false, false) => Some(Line::Text(line)),
            });
        }
        let (chunk, found) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = found.unwrap_or(buf.len());
        r.consume(used);
        if found.is_some() {
            return Ok(Some(if too_long {
                Line::TooLong
            } else {
                Line::Text(line)
            }));
        }
    }
}

/// Logs a child's stderr at debug level, line by line.
pub(super) async fn stderr_loop<R: AsyncRead + Unpin>(stderr: R, upstream: String) {
    let mut r = BufReader::new(stderr);
    while let Ok(Some(line)) = read_line(&mut r, MAX_STDERR_LINE).await {
        match line {
            Line::Text(t) => {
                tracing::debug!(upstream = %upstream, "stderr: {}", String::from_utf8_lossy(&t).trim_end())
            }
            Line::TooLong => {
                tracing::debug!(upstream = %upstream, "stderr: (overlong line skipped)")
            }
        }
    }
}

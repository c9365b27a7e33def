//! Media types: the declared one checked against the bytes' magic number
//! for the common types, found from it when none was declared, and the
//! types a browser would run (sent as attachments).

use crate::error::FileError;

/// Common types and how their bytes start.
const MAGIC: [(&str, &[u8]); 8] = [
    ("image/png", b"\x89PNG\r\n\x1a\n"),
    ("image/jpeg", b"\xff\xd8\xff"),
    ("image/gif", b"GIF8"),
    ("image/webp", b"RIFF"),
    ("application/pdf", b"%PDF-"),
    ("application/zip", b"PK\x03\x04"),
    ("application/gzip", b"\x1f\x8b"),
    ("image/bmp", b"BM"),
];

/// The common type whose magic number `head` starts with.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    MAGIC
        .iter()
        .find(|(kind, magic)| {
            head.starts_with(magic) && (*kind != "image/webp" || head.get(8..12) == Some(b"WEBP"))
        })
        .map(|(kind, _)| *kind)
}

/// Types a browser would render as a page or run: sent as attachments.
pub fn is_active_content(content_type: &str) -> bool {
    let essence = essence(content_type);
    matches!(
        essence.as_str(),
        "text/html"
            | "application/xhtml+xml"
            | "image/svg+xml"
            | "text/xml"
            | "application/xml"
            | "text/javascript"
            | "application/javascript"
    )
}

/// `type/subtype` in lower case, without parameters.
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
}

/// The type to store: the declared one (checked against the bytes when it
/// is a common type), else the one the bytes show, else
/// `application/octet-stream`.
pub(crate) fn content_type(declared: Option<&str>, head: &[u8]) -> Result<String, FileError> {
    let sniffed = sniff(head);
    let declared = declared
        .map(str::trim)
        .filter(|d| !d.is_empty() && essence(d) != "application/octet-stream");
    let Some(declared) = declared else {
        return Ok(sniffed.unwrap_or("application/octet-stream").to_owned());
    };
    let kind = essence(declared);
    let valid = kind
        .split_once('/')
        .is_some_and(|(t, s)| is_token(t) && is_token(s))
        && declared.len() <= 200
        && !declared.chars().any(char::is_control);
    if !valid {
        return Err(FileError::invalid("file", "has a malformed content type"));
    }
    let common = MAGIC.iter().any(|(k, _)| *k == kind);
    if common && sniffed != Some(kind.as_str()) {
        return Err(FileError::invalid(
            "file",
            format!("the content is not {kind}, as its type says"),
        ));
    }
    Ok(declared.to_owned())
}

/// The name to keep: the last path segment, without control characters,
/// at most 255 characters; `file` when nothing is left.
pub(crate) fn file_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let clean: String = base.chars().filter(|c| !c.is_control()).take(255).collect();
    let clean = clean.trim();
    if clean.is_empty() || clean == "." || clean == ".." {
        "file".to_owned()
    } else {
        clean.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn declared_common_types_must_match_their_bytes() {
        assert_eq!(content_type(Some("image/png"), PNG).unwrap(), "image/png");
        assert!(content_type(Some("image/png"), b"<svg onload=alert(1)>").is_err());
        assert!(content_type(Some("application/pdf"), PNG).is_err());
        assert_eq!(
            content_type(Some("text/plain; charset=utf-8"), b"hello").unwrap(),
            "text/plain; charset=utf-8"
        );
        assert_eq!(content_type(None, PNG).unwrap(), "image/png");
        assert_eq!(
            content_type(Some("application/octet-stream"), b"%PDF-1.7").unwrap(),
            "application/pdf"
        );
        assert_eq!(
            content_type(None, b"hi").unwrap(),
            "application/octet-stream"
        );
        assert!(content_type(Some("text"), b"hi").is_err());
        assert!(content_type(Some("text/plain\r\nX-Evil: 1"), b"hi").is_err());
    }

    #[test]
    fn names_lose_paths_and_control_characters() {
        assert_eq!(file_name("../../etc/passwd"), "passwd");
        assert_eq!(file_name("C:\\Users\\a\\report.pdf"), "report.pdf");
        assert_eq!(file_name("a\u{0}b\nc.txt"), "abc.txt");
        assert_eq!(file_name(".."), "file");
        assert_eq!(file_name(""), "file");
        assert_eq!(file_name(&"x".repeat(300)).len(), 255);
    }

    #[test]
    fn pages_and_scripts_are_active_content() {
        assert!(is_active_content("text/html; charset=utf-8"));
        assert!(is_active_content("IMAGE/SVG+XML"));
        assert!(!is_active_content("image/png"));
    }
}

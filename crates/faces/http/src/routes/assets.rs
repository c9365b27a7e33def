//! Scripts, styles and icons of the pages, embedded in the binary and served
//! under a path that names their version (a hash of their content), so a
//! browser keeps them for a year and asks again only when the binary's
//! assets change. Each is compressed once, at its first request, and sent
//! compressed to browsers that take gzip. The pages that link them stay
//! `no-store`.

use std::io::Write;
use std::sync::OnceLock;

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use flate2::Compression;
use flate2::write::GzEncoder;

use crate::routes::pages::secured;

/// An embedded file.
pub(crate) struct Asset {
    /// Its name in the path (`console.js`).
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
}

/// A set of assets served together under one version.
pub(crate) struct AssetSet {
    /// The mount-relative folder (`/admin/assets`).
    folder: &'static str,
    /// The first 16 hex digits of the FNV-1a hash of every name and body.
    version: String,
    /// Each asset compressed with gzip, at its first request.
    compressed: Box<[OnceLock<Vec<u8>>]>,
}

/// `body` compressed with gzip.
fn gzip(body: &str) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(body.len() / 3), Compression::best());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(body.as_bytes());
    encoder.finish().unwrap_or_default()
}

/// Whether the request's `Accept-Encoding` takes gzip.
fn takes_gzip(request: &HttpRequest) -> bool {
    request
        .headers()
        .get(header::ACCEPT_ENCODING)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value.split(',').any(|coding| {
                let mut parts = coding.split(';').map(str::trim);
                let named = parts.next().is_some_and(|c| c.eq_ignore_ascii_case("gzip"));
                // `q=0` (in any spelling) refuses it.
                named
                    && parts.all(|p| {
                        let weight = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q="));
                        weight.is_none_or(|q| q.parse::<f32>().map_or(true, |q| q > 0.0))
                    })
            })
        })
}

impl AssetSet {
    /// The set of `assets` under `folder`.
    pub(crate) fn new(folder: &'static str, assets: &[Asset]) -> Self {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for asset in assets {
            for byte in asset.name.bytes().chain([0]).chain(asset.body.bytes()) {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        Self {
            folder,
            version: format!("{hash:016x}"),
            compressed: assets.iter().map(|_| OnceLock::new()).collect(),
        }
    }

    /// Where `name` is served, under the mount path `base`.
    pub(crate) fn path(&self, base: &str, name: &str) -> String {
        format!("{base}{}/{}/{name}", self.folder, self.version)
    }

    /// Adds `{folder}/{version}/{name}` for `assets`: the current version
    /// is cached for a year; another one (a page loaded before an upgrade)
    /// gets today's file, not kept, so no cache holds it under a wrong name.
    pub(crate) fn register(
        &'static self,
        config: &mut web::ServiceConfig,
        assets: &'static [Asset],
    ) {
        config.route(
            &format!("{}/{{version}}/{{name}}", self.folder),
            web::get().to(
                move |request: HttpRequest, path: web::Path<(String, String)>| {
                    let (version, name) = path.into_inner();
                    let answer = match assets.iter().position(|a| a.name == name) {
                        Some(index) => {
                            let asset = &assets[index];
                            let mut answer = if takes_gzip(&request) {
                                let body = self.compressed[index].get_or_init(|| gzip(asset.body));
                                let mut answer = secured(asset.content_type, body.as_slice());
                                answer.headers_mut().insert(
                                    header::CONTENT_ENCODING,
                                    HeaderValue::from_static("gzip"),
                                );
                                answer
                            } else {
                                secured(asset.content_type, asset.body)
                            };
                            answer
                                .headers_mut()
                                .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
                            if version == self.version {
                                answer.headers_mut().insert(
                                    header::CACHE_CONTROL,
                                    HeaderValue::from_static("public, max-age=31536000, immutable"),
                                );
                            }
                            answer
                        }
                        None => HttpResponse::NotFound().finish(),
                    };
                    std::future::ready(answer)
                },
            ),
        );
    }
}

pub(crate) const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
pub(crate) const CSS: &str = "text/css; charset=utf-8";
pub(crate) const SVG: &str = "image/svg+xml";

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn gzip_is_taken_unless_its_weight_is_zero() {
        let takes = |value: &str| {
            takes_gzip(
                &TestRequest::default()
                    .insert_header((header::ACCEPT_ENCODING, value))
                    .to_http_request(),
            )
        };
        assert!(takes("gzip, deflate, br"));
        assert!(takes("br;q=1.0, GZIP;q=0.5"));
        assert!(!takes("gzip;q=0"));
        assert!(!takes("gzip;q=0.000"));
        assert!(!takes("deflate, br"));
        assert!(!takes_gzip(&TestRequest::default().to_http_request()));
    }
}
